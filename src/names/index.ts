/**
 * The names this controller goes by, each defined once. Shared: any module may import them (they
 * import nothing). The strings it writes into or matches in Kubernetes objects on behalf of node
 * health (taint keys, conditions, reasons) are src/health/reasons.ts's.
 */

/**
 * The component's own name: the default lock Lease (--leader-elect-resource-name), the identity
 * leases' component label, the user agent's product, the self-signed serving certificate's CN, the
 * source of companion-mode Events and the field manager other node-lifecycle controllers are told
 * apart from.
 */
export const COMPONENT_NAME = 'node-lifecycle-controller';

/** Source component of upstream-mode Events, as kube-controller-manager's node lifecycle controller records them. */
export const EVENT_SOURCE_COMPONENT = 'node-controller';
