import { randomBytes } from 'node:crypto';

/** A seeded source of uniform numbers in [0, 1): the same seed always yields the same sequence. */
export type Random = () => number;

/**
 * mulberry32: tiny, fast and good enough for test data and fault draws (never for secrets).
 * Reseedable, so bulk seeding derives a fresh stream per review without allocating one.
 */
export class Mulberry32 {
  #state: number;

  constructor(seed: number) {
    this.#state = seed >>> 0;
  }

  reseed(seed: number): this {
    this.#state = seed >>> 0;
    return this;
  }

  next(): number {
    this.#state = (this.#state + 0x6d2b79f5) >>> 0;
    let t = this.#state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
}

export function makeRandom(seed: number): Random {
  const generator = new Mulberry32(seed);
  return () => generator.next();
}

/** Mixes several integers into one 32-bit seed, so independent streams can be derived from one seed. */
export function mixSeed(...parts: number[]): number {
  let h = 0x811c9dc5;
  for (const part of parts) {
    h = Math.imul(h ^ (part >>> 0), 0x01000193);
    h ^= h >>> 13;
    h = Math.imul(h, 0x5bd1e995);
    h ^= h >>> 15;
  }
  return h >>> 0;
}

const HEX = Buffer.from('0123456789abcdef', 'latin1');
const uuidBytes = Buffer.alloc(36);

/**
 * A well-formed UUID v4 drawn from `random`, so seeded data gets the same ids on every run.
 * `firstWord`, when given, is its first 32 bits instead of a draw: a stream seeded with 32 bits
 * has only 2^32 possible ids, so a million of them collide about a hundred times (birthday
 * bound), while a distinct first word per record makes collisions impossible.
 * Written into a buffer and decoded once: a flat 36-byte string, where concatenation would leave
 * a tree of string fragments that costs several times the memory across a million reviews.
 */
export function seededUuid(random: Random, firstWord?: number): string {
  let at = 0;
  for (let word = 0; word < 4; word++) {
    let bits = word === 0 && firstWord !== undefined ? firstWord >>> 0 : Math.floor(random() * 4294967296);
    for (let nibble = 0; nibble < 8; nibble++) {
      if (at === 8 || at === 13 || at === 18 || at === 23) uuidBytes[at++] = 0x2d;
      let value = bits >>> 28;
      if (at === 14) value = 4;
      else if (at === 19) value = (value & 0x3) | 0x8;
      uuidBytes[at++] = HEX[value]!;
      bits = (bits << 4) >>> 0;
    }
  }
  return uuidBytes.toString('latin1');
}

export const randomHex = (bytes: number): string => randomBytes(bytes).toString('hex');

/**
 * A bijection on 32-bit integers: consecutive counters map to distinct, random-looking values.
 * Review numbers use it, so they look random yet can never collide on the platform.
 */
export function scramble32(n: number): number {
  let x = n >>> 0;
  x = Math.imul(x ^ (x >>> 16), 0x7feb352d) >>> 0;
  x = Math.imul(x ^ (x >>> 15), 0x846ca68b) >>> 0;
  return (x ^ (x >>> 16)) >>> 0;
}

/** The offset keeps the first review from being R-00000000, which looks like a placeholder. */
export const reviewNumber = (n: number): string =>
  `R-${scramble32(n + 0x2545f491)
    .toString(16)
    .padStart(8, '0')
    .toUpperCase()}`;
