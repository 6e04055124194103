/**
 * The kind suite on one cluster: the upstream mode first (test/kind/upstream-mode.ts: the
 * controller from its image and manifests, kube-controller-manager's own node-lifecycle-controller
 * off), then companion mode (test/kind/companion-mode.ts: kube-controller-manager turned back to its
 * defaults in place, ours beside it). One cluster creation and one image load for both; the order
 * is the import order. Run one mode alone with `-t`, e.g.
 * `./dev exec -- vitest run --project kind -t companion` (the cluster is created all the same).
 */
import { afterAll } from 'vitest';
import { deleteSharedCluster } from './cluster.js';
import './upstream-mode.js';
import './companion-mode.js';

afterAll(deleteSharedCluster, 5 * 60_000);
