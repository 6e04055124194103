/**
 * Shared by the watches of one API server. When one of them finds the server behind its
 * resourceVersion (its history went back: etcd restored from a backup), the others ask the server
 * about theirs at once instead of at their next idle timeout: every watch of that server is then
 * ahead of it, and a quiet node watch may not go idle for a minute and a half.
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
