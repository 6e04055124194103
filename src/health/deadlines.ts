/** One heap entry; `at` is its position in the heap array, kept current by every move. */
interface Slot {
  readonly key: string;
  due: number;
  at: number;
}

/**
 * An indexed binary min-heap of (key, due) pairs: O(log N) insert, update (either direction) and
 * remove by key, O(1) peek. Each key is in the heap at most once, so no stale entries pile up and the
 * heap never needs compaction: the I/O edge arms ONE timer for `peek()` and pops what is due.
 *
 * Positions live in the entries themselves (not in a Map updated on every swap) and sifting moves a
 * hole instead of swapping: a renewal, which moves a node from near the top to near the bottom, costs
 * one Map lookup and about log2(N) property writes.
 */
export class DeadlineHeap {
  private readonly slots: Slot[] = [];
  private readonly index = new Map<string, Slot>();

  get size(): number {
    return this.slots.length;
  }

  has(key: string): boolean {
    return this.index.has(key);
  }

  dueOf(key: string): number | undefined {
    return this.index.get(key)?.due;
  }

  /** The earliest entry, or undefined when empty. */
  peek(): { key: string; due: number } | undefined {
    const top = this.slots[0];
    return top === undefined ? undefined : { key: top.key, due: top.due };
  }

  /** Due time of the earliest entry, or undefined when empty (no allocation). */
  peekDue(): number | undefined {
    return this.slots[0]?.due;
  }

  /** Inserts the key or moves it to its new due time. */
  upsert(key: string, due: number): void {
    const slot = this.index.get(key);
    if (slot === undefined) {
      const added: Slot = { key, due, at: this.slots.length };
      this.slots.push(added);
      this.index.set(key, added);
      this.siftUp(added);
      return;
    }
    const old = slot.due;
    slot.due = due;
    if (due < old) this.siftUp(slot);
    else if (due > old) this.siftDown(slot);
  }

  remove(key: string): boolean {
    const slot = this.index.get(key);
    if (slot === undefined) return false;
    this.removeSlot(slot);
    return true;
  }

  /** Removes and returns the earliest entry. */
  pop(): { key: string; due: number } | undefined {
    const top = this.slots[0];
    if (top === undefined) return undefined;
    this.removeSlot(top);
    return { key: top.key, due: top.due };
  }

  clear(): void {
    this.slots.length = 0;
    this.index.clear();
  }

  /** Replaces the content with these entries in O(N) (Floyd's heap construction). */
  rebuild(entries: Iterable<readonly [string, number]>): void {
    this.clear();
    for (const [key, due] of entries) {
      const known = this.index.get(key);
      if (known !== undefined) {
        known.due = due;
        continue;
      }
      const slot: Slot = { key, due, at: this.slots.length };
      this.index.set(key, slot);
      this.slots.push(slot);
    }
    for (let i = (this.slots.length >> 1) - 1; i >= 0; i--) this.siftDown(this.slots[i]!);
  }

  private removeSlot(slot: Slot): void {
    this.index.delete(slot.key);
    const last = this.slots.pop()!;
    if (last === slot) return;
    last.at = slot.at;
    this.slots[slot.at] = last;
    this.siftDown(last);
    this.siftUp(last);
  }

  /** Moves `slot` up while its parent is later; parents step down into the hole. */
  private siftUp(slot: Slot): void {
    const slots = this.slots;
    let at = slot.at;
    while (at > 0) {
      const parentAt = (at - 1) >> 1;
      const parent = slots[parentAt]!;
      if (parent.due <= slot.due) break;
      slots[at] = parent;
      parent.at = at;
      at = parentAt;
    }
    slots[at] = slot;
    slot.at = at;
  }

  /** Moves `slot` down while a child is earlier; the earlier child steps up into the hole. */
  private siftDown(slot: Slot): void {
    const slots = this.slots;
    const n = slots.length;
    let at = slot.at;
    for (;;) {
      const l = 2 * at + 1;
      if (l >= n) break;
      let childAt = l;
      if (l + 1 < n && slots[l + 1]!.due < slots[l]!.due) childAt = l + 1;
      const child = slots[childAt]!;
      if (!(child.due < slot.due)) break;
      slots[at] = child;
      child.at = at;
      at = childAt;
    }
    slots[at] = slot;
    slot.at = at;
  }
}
