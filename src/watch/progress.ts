/**
 * What the current watch has shown so far, for the judgements made on it: the idle timer's (quiet
 * for how long; was the request answered at all, or is the path stalled?) and a clean close's
 * (closed at once without a single event?). Also whether malformed data has been logged since the
 * watch was requested: that is logged once per connection, not per line.
 */
export class WatchProgress {
  private openedAt = 0;
  private lastActivity = 0;
  /** Epoch of the watch whose response headers arrived (it was answered). */
  private answeredEpoch = -1;
  private eventCount = 0;
  private malformedLogged = false;

  /** A watch request goes out: everything starts again. */
  requested(now: number): void {
    this.eventCount = 0;
    this.malformedLogged = false;
    this.lastActivity = now;
    this.openedAt = now;
  }

  /** The server answered the watch of `epoch` (response headers): it is open from now. */
  answered(epoch: number, now: number): void {
    this.openedAt = now;
    this.lastActivity = now;
    this.answeredEpoch = epoch;
  }

  isAnswered(epoch: number): boolean {
    return this.answeredEpoch === epoch;
  }

  /** Something arrived on the watch, even part of a line. */
  heard(now: number): void {
    this.lastActivity = now;
  }

  /** The watch delivered an event (bookmarks included; not malformed data). */
  delivered(): void {
    this.eventCount++;
  }

  /** Events delivered since the watch was requested. */
  get events(): number {
    return this.eventCount;
  }

  /** How long the watch has been silent. */
  idleFor(now: number): number {
    return now - this.lastActivity;
  }

  /** The watch ends within `withinMs` of opening without having delivered an event. */
  closedAtOnce(now: number, withinMs: number): boolean {
    return this.eventCount === 0 && now - this.openedAt < withinMs;
  }

  /** True for the first malformed data since the watch was requested, false after. */
  firstMalformed(): boolean {
    if (this.malformedLogged) return false;
    this.malformedLogged = true;
    return true;
  }
}
