/**
 * Parsing API answers without `metadata.managedFields`: watch lines, list pages and the answers to
 * writes. Every object kind the controller watches (leases, nodes, pods, the election lock) is
 * stripped right after parsing, no strip function keeps managedFields, and nothing reads them in a
 * write's answer: on a node lease they are ~40% of the line (46% of a Node), most of its objects
 * one per field a manager owns. Building those objects only to drop them is the largest avoidable
 * cost on the watch path, so watches, lists and writes parse with that member cut out of the text
 * first. It lives here, not in the client, because a general client should not hide fields by
 * default: callers opt in per request.
 *
 * The cut is exact for valid JSON: in a valid line, the text `,"managedFields":[` can only be a
 * member of an object (a `"` that follows a `,` inside a string would end the string, and
 * `managedFields"` cannot follow a string), so removing it up to the `]` that closes its array
 * (brackets inside strings skipped, escapes honoured) leaves valid JSON for the same object
 * without that member. Everything else in the line is parsed by JSON.parse as before.
 *
 * What differs from a full parse: the skipped array's contents are only bracket-matched, not
 * validated, so a line whose sole syntax error sits inside managedFields is accepted (the
 * kube-apiserver never sends one; any other error, a truncated line included, still throws).
 * Where the member is first in its object or written with whitespace, it is parsed and left
 * for the strip to drop.
 */

const MEMBER = ',"managedFields":[';
const BACKSLASH = 92; // \
const OPEN_SQUARE = 91; // [
const CLOSE_SQUARE = 93; // ]
const OPEN_CURLY = 123; // {
const CLOSE_CURLY = 125; // }

/**
 * The index just past the bracket closing the array or object whose opening bracket is just
 * before `from`, or -1 when the text ends first. Strings are jumped over with indexOf (most of
 * managedFields is strings: the field paths), so only the short runs between them are scanned.
 */
export function endOfValue(text: string, from: number): number {
  const n = text.length;
  let depth = 1;
  let i = from;
  for (;;) {
    const quote = text.indexOf('"', i);
    const stop = quote === -1 ? n : quote;
    for (; i < stop; i++) {
      const c = text.charCodeAt(i);
      if (c === OPEN_SQUARE || c === OPEN_CURLY) depth++;
      else if ((c === CLOSE_SQUARE || c === CLOSE_CURLY) && --depth === 0) return i + 1;
    }
    if (quote === -1) return -1;
    // The string's closing quote: the next `"` preceded by an even run of backslashes.
    let end = quote + 1;
    for (;;) {
      end = text.indexOf('"', end);
      if (end === -1) return -1;
      let backslashes = 0;
      while (text.charCodeAt(end - 1 - backslashes) === BACKSLASH) backslashes++;
      if ((backslashes & 1) === 0) break;
      end++;
    }
    i = end + 1;
  }
}

/**
 * JSON.parse of the text with every `managedFields` member left out (see the module note): one per
 * watch line, one per item of a list page.
 */
export function parseSkippingManagedFields(text: string): unknown {
  let at = text.indexOf(MEMBER);
  if (at === -1) return JSON.parse(text);
  let kept = '';
  let from = 0;
  while (at !== -1) {
    const end = endOfValue(text, at + MEMBER.length);
    if (end === -1) return JSON.parse(text); // unterminated: let JSON.parse report it
    kept += text.slice(from, at);
    from = end;
    at = text.indexOf(MEMBER, end);
  }
  return JSON.parse(kept + text.slice(from));
}
