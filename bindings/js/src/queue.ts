// A bounded queue read as an async iterator: what one subscription or stream hands the
// application, with the watermarks a driver pauses and resumes reading at.

/** What the queue tells its driver when the reader falls behind or catches up. */
export interface Pressure {
  /** The queue reached its bound: stop reading sockets. */
  full(): void;
  /** The reader drained it to half: read again. */
  drained(): void;
}

/** A bounded FIFO of items with one reader. */
export class ItemQueue<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private head = 0;
  private waiting: ((result: IteratorResult<T>) => void) | undefined;
  private ended = false;
  private paused = false;

  constructor(
    /** Items buffered before the driver is told to stop reading. */
    readonly bound: number,
    private readonly pressure: Pressure,
    /** Called once when the reader stops early (break, return, abort). */
    private readonly onStop: () => void,
  ) {}

  /** Items waiting for the reader. */
  get size(): number {
    return this.items.length - this.head;
  }

  /** Hand `item` to the reader (or buffer it). */
  push(item: T): void {
    if (this.ended) return;
    if (this.waiting) {
      const wake = this.waiting;
      this.waiting = undefined;
      wake({ value: item, done: false });
      return;
    }
    this.items.push(item);
    if (!this.paused && this.size >= this.bound) {
      this.paused = true;
      this.pressure.full();
    }
  }

  /** No more items: the reader finishes what is buffered, then ends. */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    if (this.waiting && this.size === 0) {
      const wake = this.waiting;
      this.waiting = undefined;
      wake({ value: undefined, done: true });
    }
  }

  private take(): T | undefined {
    const item = this.items[this.head];
    this.head += 1;
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items.splice(0, this.head);
      this.head = 0;
    }
    if (this.paused && this.size <= this.bound / 2) {
      this.paused = false;
      this.pressure.drained();
    }
    return item;
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: () => {
        if (this.size > 0) {
          return Promise.resolve({ value: this.take() as T, done: false });
        }
        if (this.ended) return Promise.resolve({ value: undefined, done: true });
        return new Promise<IteratorResult<T>>((resolve) => {
          this.waiting = resolve;
        });
      },
      return: () => {
        this.stop();
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }

  /** The reader is gone: drop what is buffered and tell the driver once. */
  stop(): void {
    const wasEnded = this.ended;
    this.ended = true;
    this.items.length = 0;
    this.head = 0;
    if (this.paused) {
      this.paused = false;
      this.pressure.drained();
    }
    if (this.waiting) {
      const wake = this.waiting;
      this.waiting = undefined;
      wake({ value: undefined, done: true });
    }
    if (!wasEnded) this.onStop();
  }
}
