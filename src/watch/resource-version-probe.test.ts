import { describe, expect, it } from 'vitest';
import { ResourceVersionProbe } from './resource-version-probe.js';
import { listPage, ScriptedTransport } from './testing.js';
import type { ListRequest, WatchTransport } from './types.js';

const settle = () => new Promise((resolve) => setTimeout(resolve, 0));

function setup() {
  const t = new ScriptedTransport();
  const probe = new ResourceVersionProbe(t, 5000);
  const answers: unknown[] = [];
  const ask = (rv: string) => probe.ask(rv, (err) => answers.push(err ?? 'reached'));
  return { t, probe, answers, ask };
}

describe('ResourceVersionProbe', () => {
  it('asks for one object not older than the resourceVersion, from the watch cache', () => {
    const { t, ask } = setup();
    ask('42');
    expect(t.lists.map((l) => l.req)).toEqual<ListRequest[]>([
      { limit: 1, resourceVersion: '42', resourceVersionMatch: 'NotOlderThan', timeoutMs: 5000 },
    ]);
  });

  it('passes on the answer: none when the server has it, else the error', async () => {
    const { t, ask, answers } = setup();
    ask('42');
    t.lastList().resolve(listPage([], '50'));
    await settle();
    ask('60');
    const err = new Error('too large');
    t.lastList().reject(err);
    await settle();
    expect(answers).toEqual(['reached', err]);
  });

  it('one question at a time: asking while one is in flight does nothing', async () => {
    const { t, ask, answers } = setup();
    ask('42');
    ask('43');
    expect(t.lists).toHaveLength(1);
    t.lastList().resolve(listPage([], '50'));
    await settle();
    expect(answers).toEqual(['reached']);
    ask('44');
    expect(t.lists).toHaveLength(2);
  });

  it('cancel aborts the question and ignores its answer; a new one may be asked', async () => {
    const { t, probe, ask, answers } = setup();
    ask('42');
    probe.cancel();
    expect(t.lists[0]!.signal.aborted).toBe(true);
    ask('43');
    expect(t.lists).toHaveLength(2);
    t.lists[0]!.reject(new Error('aborted'));
    await settle();
    expect(answers).toEqual([]);
  });

  it('a transport that throws at once gives its error as the answer', async () => {
    const err = new Error('boom');
    const throwing: WatchTransport = {
      list: () => {
        throw err;
      },
      watch: () => Promise.reject(new Error('unused')),
    };
    const answers: unknown[] = [];
    new ResourceVersionProbe(throwing, 5000).ask('1', (e) => answers.push(e));
    await settle();
    expect(answers).toEqual([err]);
  });
});
