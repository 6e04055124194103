/**
 * What the heap keeps in the items themselves: the due time it orders by and the item's position in
 * the heap array (-1 when the item is not in the heap). Only the heap writes these two fields; an
 * item's owner reads them and changes `due` only through {@link DeadlineHeap.schedule} (or before
 * {@link DeadlineHeap.rebuild}).
 */
export interface Scheduled {
  due: number;
  heapAt: number;
}

/**
 * An intrusive binary min-heap of items by due time: O(log N) insert, move (either direction) and
 * remove, O(1) peek. An item is in the heap at most once, so no stale entries pile up and the heap
 * never needs compaction: the I/O edge arms ONE timer for `peekDue()` and pops what is due.
 *
 * The position lives in the item (no Map from key to position) and sifting moves a hole instead of
 * swapping: a renewal, which moves a node from near the top to near the bottom, costs no lookup at
 * all and about log2(N) property writes. The tracker's per-node entry IS the heap item, so a node
 * costs no extra object and no extra Map entry to schedule.
 */
export class DeadlineHeap<T extends Scheduled> {
  private readonly items: T[] = [];

  get size(): number {
    return this.items.length;
  }

  has(item: T): boolean {
    return item.heapAt >= 0 && this.items[item.heapAt] === item;
  }

  /** The earliest item, or undefined when empty. */
  peek(): T | undefined {
    return this.items[0];
  }

  /** Due time of the earliest item, or undefined when empty. */
  peekDue(): number | undefined {
    return this.items[0]?.due;
  }

  /** Inserts the item at `due`, or moves it there. */
  schedule(item: T, due: number): void {
    if (!this.has(item)) {
      item.due = due;
      item.heapAt = this.items.length;
      this.items.push(item);
      this.siftUp(item);
      return;
    }
    const old = item.due;
    item.due = due;
    if (due < old) this.siftUp(item);
    else if (due > old) this.siftDown(item);
  }

  /** Takes the item out; false when it was not in the heap. */
  remove(item: T): boolean {
    if (!this.has(item)) return false;
    const last = this.items.pop()!;
    const at = item.heapAt;
    item.heapAt = -1;
    if (last === item) return true;
    last.heapAt = at;
    this.items[at] = last;
    this.siftDown(last);
    this.siftUp(last);
    return true;
  }

  /** Removes and returns the earliest item. */
  pop(): T | undefined {
    const top = this.items[0];
    if (top !== undefined) this.remove(top);
    return top;
  }

  clear(): void {
    for (const item of this.items) item.heapAt = -1;
    this.items.length = 0;
  }

  /**
   * Replaces the content with these items, each at its current `due`, in O(N) (Floyd's heap
   * construction). An item listed twice is taken once.
   */
  rebuild(items: Iterable<T>): void {
    this.clear();
    for (const item of items) {
      if (item.heapAt >= 0) continue;
      item.heapAt = this.items.length;
      this.items.push(item);
    }
    for (let i = (this.items.length >> 1) - 1; i >= 0; i--) this.siftDown(this.items[i]!);
  }

  /** Moves `item` up while its parent is later; parents step down into the hole. */
  private siftUp(item: T): void {
    const items = this.items;
    let at = item.heapAt;
    while (at > 0) {
      const parentAt = (at - 1) >> 1;
      const parent = items[parentAt]!;
      if (parent.due <= item.due) break;
      items[at] = parent;
      parent.heapAt = at;
      at = parentAt;
    }
    items[at] = item;
    item.heapAt = at;
  }

  /** Moves `item` down while a child is earlier; the earlier child steps up into the hole. */
  private siftDown(item: T): void {
    const items = this.items;
    const n = items.length;
    let at = item.heapAt;
    for (;;) {
      const l = 2 * at + 1;
      if (l >= n) break;
      let childAt = l;
      if (l + 1 < n && items[l + 1]!.due < items[l]!.due) childAt = l + 1;
      const child = items[childAt]!;
      if (!(child.due < item.due)) break;
      items[at] = child;
      child.heapAt = at;
      at = childAt;
    }
    items[at] = item;
    item.heapAt = at;
  }
}
