import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { stripLease, stripNode } from '../watch/strip.js';
import { endOfValue, parseSkippingManagedFields } from './json.js';

/** The full parse with the first managedFields member deleted: what the cut must produce. */
function expected(line: string): unknown {
  const ev = JSON.parse(line) as { object?: { metadata?: Record<string, unknown> } };
  if (ev.object?.metadata) delete ev.object.metadata.managedFields;
  return ev;
}

// A line as kube-apiserver writes it for a kubelet's lease renewal (field paths with quotes).
const uid = '5f0c2a5e-7d4e-4d7a-9a57-0b5b8f2b1c3d';
const leaseLine = JSON.stringify({
  type: 'MODIFIED',
  object: {
    kind: 'Lease',
    apiVersion: 'coordination.k8s.io/v1',
    metadata: {
      name: 'node-1',
      namespace: 'kube-node-lease',
      uid: 'u-1',
      resourceVersion: '1234',
      creationTimestamp: '2026-12-01T00:00:00Z',
      ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: 'node-1', uid }],
      managedFields: [
        {
          manager: 'kubelet',
          operation: 'Update',
          apiVersion: 'coordination.k8s.io/v1',
          time: '2026-12-01T00:00:10Z',
          fieldsType: 'FieldsV1',
          fieldsV1: {
            'f:metadata': { 'f:ownerReferences': { '.': {}, [`k:{"uid":"${uid}"}`]: {} } },
            'f:spec': { 'f:holderIdentity': {}, 'f:leaseDurationSeconds': {}, 'f:renewTime': {} },
          },
        },
      ],
    },
    spec: { holderIdentity: 'node-1', leaseDurationSeconds: 40, renewTime: '2026-12-01T00:00:10.123456Z' },
  },
});

// Strings full of what the scan must not mistake for structure.
const tricky = fc.constantFrom('"', '\\', '[', ']', '{', '}', ',', ':', 'a', 'é', '\u2028', '\u0000', '\\"');
// Object keys outside managedFields (the part both sides parse) carry no escape sequence: V8's
// JSON.parse (Node 24 included) can read an escaped key back as an earlier escaped key of the same
// shape (nodejs/node#63785), which would make the oracle wrong, not our cut. Kubernetes keys
// never hold `"` or `\`; values and everything inside managedFields still do here.
const keySafe = fc.constantFrom('[', ']', '{', '}', ',', ':', 'a', 'é', '\u2028');
const key = fc.string({ unit: keySafe, maxLength: 6 });
const value = fc.oneof(fc.jsonValue({ stringUnit: keySafe, maxDepth: 3 }), fc.string({ unit: tricky }));
const anyJson = fc.jsonValue({ stringUnit: tricky, maxDepth: 4 });

describe('parseSkippingManagedFields', () => {
  it('a lease renewal: the same object as a full parse without managedFields, and the same strip', () => {
    const cut = parseSkippingManagedFields(leaseLine) as { object: { metadata: object } };
    expect(cut).toEqual(expected(leaseLine));
    expect(cut.object.metadata).not.toHaveProperty('managedFields');
    const full = JSON.parse(leaseLine) as { object: unknown };
    expect(stripLease(cut.object)).toEqual(stripLease(full.object));
    expect(stripNode(cut.object)).toEqual(stripNode(full.object));
  });

  it('equals the full parse minus managedFields for any JSON around and inside it', () => {
    fc.assert(
      fc.property(
        fc.dictionary(key, value, { maxKeys: 4 }),
        fc.array(anyJson, { maxLength: 4 }),
        fc.dictionary(key, value, { maxKeys: 3 }),
        (before, managedFields, after) => {
          // managedFields neither first nor last in metadata, JSON.stringify's compact form.
          const metadata: Record<string, unknown> = { name: 'n', ...before };
          delete metadata.managedFields;
          metadata.managedFields = managedFields;
          for (const [k, v] of Object.entries(after)) if (k !== 'managedFields') metadata[k] = v;
          const line = JSON.stringify({ type: 'MODIFIED', object: { metadata, spec: after } });
          expect(parseSkippingManagedFields(line)).toEqual(expected(line));
        },
      ),
      { numRuns: 500 },
    );
  });

  it('a list page: every item without managedFields, nothing else changed', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.dictionary(key, value, { maxKeys: 3 }), fc.array(anyJson, { maxLength: 3 })), {
          maxLength: 6,
        }),
        (items) => {
          const list = {
            kind: 'LeaseList',
            metadata: { resourceVersion: '7', continue: 'c' },
            items: items.map(([rest, managedFields]) => ({
              metadata: { name: 'n', managedFields, ...rest },
              spec: rest,
            })),
          };
          const text = JSON.stringify(list);
          const want = JSON.parse(text) as { items: Array<{ metadata: Record<string, unknown> }> };
          for (const item of want.items) delete item.metadata.managedFields;
          expect(parseSkippingManagedFields(text)).toEqual(want);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('parses the whole line when the member is absent, first in its object or spaced out', () => {
    const first = '{"type":"ADDED","object":{"metadata":{"managedFields":[{"a":1}],"name":"n"}}}';
    expect(parseSkippingManagedFields(first)).toEqual(JSON.parse(first));
    const spaced = '{"type":"ADDED","object":{"metadata":{"name":"n", "managedFields": [{"a":1}]}}}';
    expect(parseSkippingManagedFields(spaced)).toEqual(JSON.parse(spaced));
    const none = '{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}';
    expect(parseSkippingManagedFields(none)).toEqual(JSON.parse(none));
  });

  it('a truncated or broken line still throws, like JSON.parse', () => {
    for (let cut = leaseLine.indexOf('managedFields'); cut < leaseLine.length; cut += 7) {
      expect(() => parseSkippingManagedFields(leaseLine.slice(0, cut))).toThrow(SyntaxError);
    }
    // A syntax error outside the skipped array is reported.
    expect(() => parseSkippingManagedFields(leaseLine.replace('"spec":{', '"spec":{,'))).toThrow(SyntaxError);
    // A string inside managedFields that never ends swallows the rest of the line: unterminated.
    const open = leaseLine.replace('"manager":"kubelet"', '"manager":"kubelet\\"');
    expect(() => parseSkippingManagedFields(open)).toThrow(SyntaxError);
  });
});

describe('endOfValue', () => {
  it('finds the closing bracket past strings with brackets, quotes and escaped backslashes', () => {
    const text = '[{"a":"]}","b":"\\\\","c":"\\"]"},[1,[2]]],"tail"';
    expect(text.slice(0, endOfValue(text, 1))).toBe('[{"a":"]}","b":"\\\\","c":"\\"]"},[1,[2]]]');
    expect(JSON.parse(text.slice(0, endOfValue(text, 1)))).toHaveLength(2);
  });

  it('returns -1 when the text ends inside the value or inside a string', () => {
    expect(endOfValue('[1,[2]', 1)).toBe(-1);
    expect(endOfValue('["a]', 1)).toBe(-1);
    expect(endOfValue('["a\\"]', 1)).toBe(-1);
  });
});
