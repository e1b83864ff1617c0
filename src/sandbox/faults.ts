import { makeRandom, mixSeed, type Random } from './random.js';
import { type Faults, INVALID_REVIEW_SHAPES, type InvalidReviewShape } from './schema.js';

/** What happens to one partner request before (or instead of) its handler. */
export interface PartnerFault {
  outcome: 'pass' | 'error500' | 'error429' | 'error503' | 'hang' | 'truncated' | 'lateAnswer';
  delayMs: number;
  /** The error body echoes the API key; a request that would pass is answered 400 instead. */
  echoKey: boolean;
}

const PASS: PartnerFault = { outcome: 'pass', delayMs: 0, echoKey: false };

/** How the review feed lies about one page (see `paginationFaultsSchema`). */
export type PageQuirk = 'null_cursor' | 'repeat_cursor' | 'identical_page';

/** FNV-1a of a string: review ids become numbers for the per-record draws. */
function hashText(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

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

  forPartnerRequest(path: string, method = 'GET'): PartnerFault {
    const f = this.#faults.partner;
    if (f === undefined) return PASS;
    if (f.routes !== undefined && !f.routes.some((prefix) => path.startsWith(prefix))) return PASS;
    if (f.methods !== undefined && !f.methods.includes(method as (typeof f.methods)[number])) return PASS;
    const delayMs = f.delay !== undefined && this.#random() < f.delay ? (f.delayMs ?? 1000) : 0;
    const echoKey = f.echoKey ?? false;
    // One draw picks at most one failure; the fractions are disjoint bands of [0, 1).
    let r = this.#random();
    for (const outcome of ['hang', 'error500', 'error429', 'error503', 'truncated', 'lateAnswer'] as const) {
      const p = f[outcome] ?? 0;
      if (r < p) return { outcome, delayMs, echoKey };
      r -= p;
    }
    return delayMs === 0 && !echoKey ? PASS : { outcome: 'pass', delayMs, echoKey };
  }

  /**
   * How the feed breaks review `id`, or undefined when it is served intact. Decided by the review
   * id and the seed, not by a draw per request: a poison record stays poisoned on every read.
   */
  invalidReviewShape(id: string): InvalidReviewShape | undefined {
    const f = this.#faults.partner;
    const invalid = f?.invalidReviews;
    if (invalid === undefined) return undefined;
    const h = hashText(id);
    const chosen = Array.isArray(invalid)
      ? invalid.includes(id)
      : mixSeed(this.#seed, h) / 4294967296 < invalid;
    if (!chosen) return undefined;
    return (
      f?.invalidReviewShape ?? INVALID_REVIEW_SHAPES[mixSeed(this.#seed, h, 1) % INVALID_REVIEW_SHAPES.length]
    );
  }

  /** How the review feed lies about the walk's `pageNumber`-th page (1-based), if at all. */
  pageQuirk(pageNumber: number): PageQuirk | undefined {
    const p = this.#faults.partner?.pagination;
    if (p === undefined) return undefined;
    if (p.nullCursorAfterPages !== undefined && pageNumber === p.nullCursorAfterPages + 1)
      return 'null_cursor';
    if (p.repeatCursorAfterPages !== undefined && pageNumber > p.repeatCursorAfterPages)
      return 'repeat_cursor';
    if (p.identicalPagesAfterPages !== undefined && pageNumber > p.identicalPagesAfterPages) {
      return 'identical_page';
    }
    return undefined;
  }

  /**
   * The `Retry-After` of an injected 429 (1 s unless `retryAfterSeconds` says otherwise) or 503
   * (only when `retryAfterSeconds` is given: many a 503 says nothing of when to come back), in
   * `retryAfterForm`; undefined for none. A date is rounded up to the next whole second, the
   * precision of an HTTP date, so a client waiting until it never comes back early.
   */
  retryAfterHeader(status: 429 | 503, nowMs: number): string | undefined {
    const f = this.#faults.partner;
    const seconds = f?.retryAfterSeconds ?? (status === 429 ? 1 : undefined);
    const form = f?.retryAfterForm ?? 'seconds';
    if (seconds === undefined || form === 'absent') return undefined;
    if (form === 'seconds') return String(seconds);
    return new Date(Math.ceil(nowMs / 1000) * 1000 + seconds * 1000).toUTCString();
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
