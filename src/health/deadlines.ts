/**
 * An indexed binary min-heap of (key, due) pairs: O(log N) insert, update (either direction) and
 * remove by key, O(1) peek. Each key is in the heap at most once, so no stale entries pile up and the
 * heap never needs compaction: the I/O edge arms ONE timer for `peek()` and pops what is due.
 */
export class DeadlineHeap {
  private readonly keys: string[] = [];
  private readonly dues: number[] = [];
  private readonly index = new Map<string, number>();

  get size(): number {
    return this.keys.length;
  }

  has(key: string): boolean {
    return this.index.has(key);
  }

  dueOf(key: string): number | undefined {
    const i = this.index.get(key);
    return i === undefined ? undefined : this.dues[i];
  }

  /** The earliest entry, or undefined when empty. */
  peek(): { key: string; due: number } | undefined {
    if (this.keys.length === 0) return undefined;
    return { key: this.keys[0]!, due: this.dues[0]! };
  }

  /** Inserts the key or moves it to its new due time. */
  upsert(key: string, due: number): void {
    const i = this.index.get(key);
    if (i === undefined) {
      this.keys.push(key);
      this.dues.push(due);
      const at = this.keys.length - 1;
      this.index.set(key, at);
      this.siftUp(at);
      return;
    }
    const old = this.dues[i]!;
    this.dues[i] = due;
    if (due < old) this.siftUp(i);
    else if (due > old) this.siftDown(i);
  }

  remove(key: string): boolean {
    const i = this.index.get(key);
    if (i === undefined) return false;
    this.removeAt(i);
    return true;
  }

  /** Removes and returns the earliest entry. */
  pop(): { key: string; due: number } | undefined {
    const top = this.peek();
    if (top) this.removeAt(0);
    return top;
  }

  clear(): void {
    this.keys.length = 0;
    this.dues.length = 0;
    this.index.clear();
  }

  /** Replaces the content with these entries in O(N) (Floyd's heap construction). */
  rebuild(entries: Iterable<readonly [string, number]>): void {
    this.clear();
    for (const [key, due] of entries) {
      if (this.index.has(key)) {
        this.dues[this.index.get(key)!] = due;
        continue;
      }
      this.index.set(key, this.keys.length);
      this.keys.push(key);
      this.dues.push(due);
    }
    for (let i = (this.keys.length >> 1) - 1; i >= 0; i--) this.siftDown(i);
  }

  private removeAt(i: number): void {
    const last = this.keys.length - 1;
    const key = this.keys[i]!;
    this.index.delete(key);
    if (i === last) {
      this.keys.pop();
      this.dues.pop();
      return;
    }
    const movedKey = this.keys.pop()!;
    const movedDue = this.dues.pop()!;
    this.keys[i] = movedKey;
    this.dues[i] = movedDue;
    this.index.set(movedKey, i);
    this.siftDown(i);
    this.siftUp(i);
  }

  private swap(a: number, b: number): void {
    const ka = this.keys[a]!;
    const kb = this.keys[b]!;
    const da = this.dues[a]!;
    this.keys[a] = kb;
    this.keys[b] = ka;
    this.dues[a] = this.dues[b]!;
    this.dues[b] = da;
    this.index.set(kb, a);
    this.index.set(ka, b);
  }

  private siftUp(i: number): void {
    let at = i;
    while (at > 0) {
      const parent = (at - 1) >> 1;
      if (this.dues[parent]! <= this.dues[at]!) return;
      this.swap(at, parent);
      at = parent;
    }
  }

  private siftDown(i: number): void {
    const n = this.keys.length;
    let at = i;
    for (;;) {
      const l = 2 * at + 1;
      const r = l + 1;
      let min = at;
      if (l < n && this.dues[l]! < this.dues[min]!) min = l;
      if (r < n && this.dues[r]! < this.dues[min]!) min = r;
      if (min === at) return;
      this.swap(at, min);
      at = min;
    }
  }
}
