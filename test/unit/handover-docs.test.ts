import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO, walkFiles } from './manifests.support.js';

/**
 * Every place that tells an operator which `--controllers` value to give kube-controller-manager
 * gives the same one. `*,-node-lifecycle-controller` alone drops `bootstrapsigner` and
 * `tokencleaner`, which kubeadm turns on (its default is `*,bootstrapsigner,tokencleaner`), and
 * `kubeadm join` stops working; the docs may only show it as the thing not to do ("a bare ...").
 */

const files = [
  join(REPO, 'README.md'),
  ...walkFiles(join(REPO, 'docs'), (p) => p.endsWith('.md')),
  join(REPO, 'test', 'kind', 'kind-config.yaml'),
];

/** Each `*,...-node-lifecycle-controller` value, with the 40 characters before it. */
function values(text: string): { value: string; before: string }[] {
  return [...text.matchAll(/\*,[a-z,-]*-node-lifecycle-controller/g)].map((m) => ({
    value: m[0],
    before: text.slice(Math.max(0, m.index - 40), m.index).replace(/\s+/g, ' '),
  }));
}

describe('the kube-controller-manager hand-over value is the same everywhere', () => {
  it('the scan is real: it finds the value, and a bare one', () => {
    expect(values('use `--controllers=*,-node-lifecycle-controller` here')).toEqual([
      { value: '*,-node-lifecycle-controller', before: 'use `--controllers=' },
    ]);
    const found = files.flatMap((f) => values(readFileSync(f, 'utf8')));
    expect(found.length).toBeGreaterThanOrEqual(5);
  });

  it('every value keeps bootstrapsigner and tokencleaner, unless shown as the mistake', () => {
    const wrong = files.flatMap((f) =>
      values(readFileSync(f, 'utf8'))
        .filter((v) => v.value !== '*,bootstrapsigner,tokencleaner,-node-lifecycle-controller')
        .filter((v) => !/a bare `$/.test(v.before))
        .map((v) => `${relative(REPO, f)}: ...${v.before}${v.value}`),
    );
    expect(wrong).toEqual([]);
  });
});
