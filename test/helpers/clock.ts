import type { Clock } from '../../src/clock.ts';

/** A clock tests move by hand. */
export class TestClock implements Clock {
  constructor(private t = new Date('2026-01-01T00:00:00Z').getTime()) {}
  now(): Date {
    return new Date(this.t);
  }
  advance(ms: number): void {
    this.t += ms;
  }
  set(date: Date): void {
    this.t = date.getTime();
  }
}
