import type { AnomalyKind, EventReason, EventType } from './reasons.js';

/** core/v1 ObjectReference, the part an Event's involvedObject needs. */
export interface ObjectRef {
  apiVersion: 'v1';
  kind: 'Node' | 'Pod' | 'Lease';
  name: string;
  namespace?: string;
  uid?: string;
}

/** An Event to emit, as data. The writer adds source component, counts and timestamps. */
export interface EventRecord {
  involvedObject: ObjectRef;
  type: EventType;
  reason: EventReason;
  message: string;
}

/** Bad data seen while observing; never thrown. */
export interface Anomaly {
  kind: AnomalyKind;
  object: 'Lease' | 'Node' | 'Pod';
  /** Object name (node name for leases); '' when the object had none. */
  name: string;
  namespace?: string;
  /** Free text for the log line (the offending value, ...). */
  detail?: string;
  /**
   * True the first time this (object name, kind) is reported since the name was first tracked
   * (or forgotten): log when true, count every time.
   */
  first: boolean;
}

/** Per-node grace periods in milliseconds. */
export interface GraceConfig {
  /** Grace for nodes that have posted a Ready condition (upstream --node-monitor-grace-period). */
  monitorGraceMs: number;
  /** Grace for nodes that never posted Ready (upstream --node-startup-grace-period). */
  startupGraceMs: number;
}
