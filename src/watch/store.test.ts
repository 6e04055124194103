import { describe, expect, it } from 'vitest';
import type { Pod } from '../kube/types.js';
import { Store } from './store.js';

const pod = (name: string, node: string | undefined, rv = '1', ns = 'default'): Pod => ({
  metadata: { name, namespace: ns, resourceVersion: rv },
  spec: { nodeName: node },
});

describe('Store', () => {
  it('keys namespaced objects ns/name and cluster objects by name', () => {
    const s = new Store<Pod>();
    s.apply({ type: 'Apply', object: pod('p1', 'n1') });
    s.apply({ type: 'Apply', object: { metadata: { name: 'node-a' } } });
    expect(s.get('default/p1')?.metadata.name).toBe('p1');
    expect(s.getByName('p1', 'default')?.metadata.name).toBe('p1');
    expect(s.getByName('node-a')?.metadata.name).toBe('node-a');
    expect(s.get('p1')).toBeUndefined();
    expect(s.size).toBe(2);
  });

  it('applies updates and deletes; deleting an unknown object is a no-op', () => {
    const s = new Store<Pod>();
    s.apply({ type: 'InitApply', object: pod('p1', 'n1', '1') });
    s.apply({ type: 'Apply', object: pod('p1', 'n1', '2') });
    expect(s.get('default/p1')?.metadata.resourceVersion).toBe('2');
    s.apply({ type: 'Delete', object: pod('ghost', 'n1') });
    s.apply({ type: 'Delete', object: pod('p1', 'n1', '3') });
    expect(s.size).toBe(0);
    expect(s.list()).toEqual([]);
  });

  it('maintains a secondary index through moves and deletes', () => {
    const s = new Store<Pod>({ indexers: { nodeName: (p) => p.spec?.nodeName } });
    s.apply({ type: 'Apply', object: pod('a', 'n1') });
    s.apply({ type: 'Apply', object: pod('b', 'n1') });
    s.apply({ type: 'Apply', object: pod('c', undefined) });
    expect(
      s
        .byIndex('nodeName', 'n1')
        .map((p) => p.metadata.name)
        .sort(),
    ).toEqual(['a', 'b']);
    // Update in place: the index returns the new object.
    s.apply({ type: 'Apply', object: pod('a', 'n1', '2') });
    expect(s.byIndex('nodeName', 'n1').find((p) => p.metadata.name === 'a')?.metadata.resourceVersion).toBe(
      '2',
    );
    // c gets scheduled, b moves (never happens to pods, but the index must not care).
    s.apply({ type: 'Apply', object: pod('c', 'n2') });
    s.apply({ type: 'Apply', object: pod('b', 'n2') });
    expect(s.byIndex('nodeName', 'n1').map((p) => p.metadata.name)).toEqual(['a']);
    expect(s.countByIndex('nodeName', 'n2')).toBe(2);
    s.apply({ type: 'Delete', object: pod('a', 'n1') });
    expect(s.byIndex('nodeName', 'n1')).toEqual([]);
    expect(s.indexValues('nodeName')).toEqual(['n2']);
    expect(() => s.byIndex('nope', 'x')).toThrow(/no index named nope/);
  });

  it('supports multi-valued indexes', () => {
    const s = new Store<Pod>({ indexers: { labels: (p) => Object.keys(p.metadata.labels ?? {}) } });
    s.apply({ type: 'Apply', object: { metadata: { name: 'a', labels: { x: '1', y: '1' } } } });
    s.apply({ type: 'Apply', object: { metadata: { name: 'a', labels: { y: '1', z: '1' } } } });
    expect(s.countByIndex('labels', 'x')).toBe(0);
    expect(s.countByIndex('labels', 'y')).toBe(1);
    expect(s.countByIndex('labels', 'z')).toBe(1);
  });

  it('opens the synced gate at the first InitDone only', async () => {
    const s = new Store<Pod>();
    const seen: boolean[] = [];
    s.synced$.subscribe((v) => seen.push(v));
    let resolved = false;
    const p = s.whenSynced().then(() => {
      resolved = true;
    });
    s.apply({ type: 'Init' });
    s.apply({ type: 'InitApply', object: pod('a', 'n1') });
    await Promise.resolve();
    expect(resolved).toBe(false);
    expect(s.isSynced).toBe(false);
    s.apply({ type: 'InitDone' });
    await p;
    expect(resolved).toBe(true);
    expect(s.isSynced).toBe(true);
    s.apply({ type: 'InitDone' });
    expect(seen).toEqual([true]);
    // Late subscribers still see it.
    const late: boolean[] = [];
    s.synced$.subscribe((v) => late.push(v));
    expect(late).toEqual([true]);
  });
});
