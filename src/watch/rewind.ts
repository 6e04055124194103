/**
 * Shared by the watches of one API server. When one of them finds the server behind its
 * resourceVersion (its history went back: etcd restored from a backup), the others relist at once:
 * their resourceVersions come from the lost history too, and one the new history has already
 * passed would not even be refused (a watch from it skips what was written since the restore).
 */
export class ServerRewindSignal {
  private readonly listeners = new Set<(from: string) => void>();

  /** Calls `fn` with the resource of the watch that found the rewind; returns the unsubscribe. */
  listen(fn: (from: string) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  raise(from: string): void {
    for (const fn of [...this.listeners]) fn(from);
  }
}
