import { makeRandom, type Random } from './random.js';
import type { Faults } from './schema.js';

/** What happens to one partner request before (or instead of) its handler. */
export interface PartnerFault {
  outcome: 'pass' | 'error500' | 'error429' | 'hang' | 'truncated';
  delayMs: number;
}

const PASS: PartnerFault = { outcome: 'pass', delayMs: 0 };

/**
 * The faults currently injected, and the seeded draws that apply them: each partner request
 * draws once, so over many requests the fractions are honoured and a run with the same seed and
 * the same requests injects the same faults.
 */
export class FaultPlan {
  #faults: Faults = {};
  readonly #seed: number;
  #random: Random;

  constructor(seed: number) {
    this.#seed = seed;
    this.#random = makeRandom(seed);
  }

  get current(): Faults {
    return this.#faults;
  }

  /** Replaces every fault (`{}` clears them) and restarts the draws, so a test is reproducible. */
  set(faults: Faults): void {
    this.#faults = faults;
    this.#random = makeRandom(this.#seed);
  }

  forPartnerRequest(path: string): PartnerFault {
    const f = this.#faults.partner;
    if (f === undefined) return PASS;
    if (f.routes !== undefined && !f.routes.some((prefix) => path.startsWith(prefix))) return PASS;
    const delayMs = f.delay !== undefined && this.#random() < f.delay ? (f.delayMs ?? 1000) : 0;
    // One draw picks at most one failure; the fractions are disjoint bands of [0, 1).
    let r = this.#random();
    for (const outcome of ['hang', 'error500', 'error429', 'truncated'] as const) {
      const p = f[outcome] ?? 0;
      if (r < p) return { outcome, delayMs };
      r -= p;
    }
    return delayMs === 0 ? PASS : { outcome: 'pass', delayMs };
  }

  get retryAfterSeconds(): number {
    return this.#faults.partner?.retryAfterSeconds ?? 1;
  }

  /** Whether a delivered event is sent a second time. */
  duplicateDelivery(): boolean {
    const p = this.#faults.webhooks?.duplicate ?? 0;
    return p > 0 && this.#random() < p;
  }

  get reorderDeliveries(): boolean {
    return this.#faults.webhooks?.reorder ?? false;
  }

  get failFirstAttempts(): number {
    return this.#faults.webhooks?.failFirst ?? 0;
  }
}
