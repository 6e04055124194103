import { describe, expect, it } from 'vitest';
import type { KubeObject } from '../kube/types.js';
import { HeldObjects } from './held-objects.js';
import { obj } from './testing.js';
import { objectKey } from './types.js';

const names = (objs: KubeObject[]) => objs.map((o) => o.metadata.name);

function list(held: HeldObjects<KubeObject>, ...objs: KubeObject[]): string[] {
  held.beginList();
  for (const o of objs) held.listed(o);
  return names(held.endList());
}

describe('HeldObjects', () => {
  it('without a known collection: what a relist no longer returns vanished', () => {
    const held = new HeldObjects<KubeObject>(objectKey, undefined);
    expect(list(held, obj('a', '1'), obj('b', '2'))).toEqual([]);
    expect(list(held, obj('a', '3'))).toEqual(['b']);
  });

  it('remembers what the stream emitted as added or changed, forgets what it deleted', () => {
    const held = new HeldObjects<KubeObject>(objectKey, undefined);
    list(held, obj('a', '1'), obj('b', '2'));
    held.remember(obj('c', '3'));
    held.forget(obj('a', '1'));
    expect(list(held)).toEqual(['b', 'c']);
  });

  it('gives the vanished objects as last held', () => {
    const held = new HeldObjects<KubeObject>(objectKey, undefined);
    list(held, obj('a', '1'));
    held.remember(obj('a', '7'));
    held.beginList();
    expect(held.endList().map((o) => o.metadata.resourceVersion)).toEqual(['7']);
  });

  it('with a known collection: reads it and keeps nothing of its own', () => {
    const store = new Map<string, KubeObject>([['x', obj('x', '1')]]);
    const keyed: KubeObject[] = [];
    const held = new HeldObjects<KubeObject>((o) => {
      keyed.push(o);
      return objectKey(o);
    }, store);
    held.remember(obj('c', '3'));
    held.forget(obj('x', '1'));
    expect(keyed).toEqual([]);
    expect(list(held, obj('a', '1'))).toEqual(['x']);
    expect(names(keyed)).toEqual(['a']);
  });

  it('keys objects with the given keyOf', () => {
    const held = new HeldObjects<KubeObject>((o) => o.metadata.name.toUpperCase(), {
      forEach: (fn) => fn(obj('a', '1'), 'A'),
    });
    expect(list(held, obj('a', '2'))).toEqual([]);
  });
});
