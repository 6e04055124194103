{{/* The install's name: the release's, or <release>-node-lifecycle-controller (63 characters at most). */}}
{{- define "nlc.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The install's namespace. */}}
{{- define "nlc.namespace" -}}
{{- default .Release.Namespace .Values.namespace.name -}}
{{- end -}}

{{/* The labels the kustomize base puts on every object, and Helm's own. */}}
{{- define "nlc.labels" -}}
app.kubernetes.io/name: node-lifecycle-controller
app.kubernetes.io/part-of: node-lifecycle-controller
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/*
What selects the controller's pods (the Deployment, the Service, the PDB, the NetworkPolicy) and,
with the component label, the ServiceMonitor's Service: the name and the release, so that two
releases in one namespace never select each other's pods. The Deployment's selector is immutable:
an upgrade from a chart whose selector had the name only needs the Deployment deleted first
(CHANGELOG).
*/}}
{{- define "nlc.selector" -}}
app.kubernetes.io/name: node-lifecycle-controller
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "nlc.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/*
The controller's flags from .Values.controller, in this order (flag names as `--help` lists them;
test/unit/chart.test.ts checks each against src/config/flags.ts).
*/}}
{{- define "nlc.flagNames" -}}
mode: mode
companionTaintKey: companion-taint-key
companionEvictAfter: companion-evict-after
companionMarkPodsNotReady: companion-mark-pods-not-ready
nodeMonitorGracePeriod: node-monitor-grace-period
nodeStartupGracePeriod: node-startup-grace-period
nodeMonitorPeriod: node-monitor-period
nodeEvictionRate: node-eviction-rate
secondaryNodeEvictionRate: secondary-node-eviction-rate
largeClusterSizeThreshold: large-cluster-size-threshold
unhealthyZoneThreshold: unhealthy-zone-threshold
maxNoExecuteTaints: max-noexecute-taints
maxNoExecutePercent: max-noexecute-percent
maxNoExecuteWindow: max-noexecute-window
markPodsNotReady: mark-pods-not-ready
watchSilenceThreshold: watch-silence-threshold
kubeApiQps: kube-api-qps
kubeApiBurst: kube-api-burst
logFormat: log-format
outOfServiceSignals: out-of-service-signals
outOfServiceAfter: out-of-service-after
secondOpinion: second-opinion
confirmAfter: confirm-after
cutOffHold: cut-off-hold
{{- end -}}

{{- define "nlc.flagOrder" -}}
mode nodeMonitorGracePeriod companionTaintKey companionEvictAfter companionMarkPodsNotReady nodeStartupGracePeriod nodeMonitorPeriod nodeEvictionRate secondaryNodeEvictionRate largeClusterSizeThreshold unhealthyZoneThreshold maxNoExecuteTaints maxNoExecutePercent maxNoExecuteWindow markPodsNotReady watchSilenceThreshold kubeApiQps kubeApiBurst logFormat outOfServiceSignals outOfServiceAfter secondOpinion confirmAfter cutOffHold
{{- end -}}

{{/*
The flags that take a Go duration. values.schema.json lets a number through for these only so that
the Deployment can refuse it with what is wanted (the schema would say "want string").
*/}}
{{- define "nlc.durationKeys" -}}
companionEvictAfter nodeMonitorGracePeriod nodeStartupGracePeriod nodeMonitorPeriod maxNoExecuteWindow watchSilenceThreshold outOfServiceAfter confirmAfter cutOffHold
{{- end -}}

{{/* Where the node-pool ConfigMap is mounted. */}}
{{- define "nlc.poolConfigDir" -}}/etc/node-lifecycle-controller/pools{{- end -}}

{{/* Companion mode with evictions on: the ClusterRole needs create on pods/eviction. */}}
{{- define "nlc.companionEvicts" -}}
{{- if and (eq (toString .Values.controller.mode) "companion") (not (has (toString .Values.controller.companionEvictAfter) (list "" "0" "0s" "0ms" "0m" "0h"))) -}}true{{- end -}}
{{- end -}}
