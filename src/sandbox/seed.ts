import { Mulberry32, makeRandom, mixSeed, type Random, scramble32, seededUuid } from './random.js';
import type { Company, ReviewRecord, Store } from './store.js';

/**
 * Deterministic bulk reviews: review `i` of a company is a pure function of (seed, company ordinal,
 * i), so the first company holds the same reviews on every start and a second seeding continues
 * the series further back in time instead of repeating ids.
 */

/** The newest seeded review is created at this instant; older ones step back ~30 s each. */
export const SEED_ANCHOR_MS = Date.parse('2025-06-01T00:00:00.000Z');
const STEP_MS = 30_000;

const FIRST_NAMES = ['Maria', 'José', 'Aoife', 'Wei', 'Fatima', 'Liam', 'Olamide', 'Zoë', 'Søren', 'Priya'];
const LAST_NAMES = ["O'Brien", 'Núñez', 'Smith', '王', 'Kowalski', 'Nguyen', 'Müller', 'Haddad', 'Okafor'];
/** Every first-last combination, built once so a million reviews share ninety strings. */
const FULL_NAMES = FIRST_NAMES.flatMap((first) => LAST_NAMES.map((last) => `${first} ${last}`));
const COMMENTS: ReadonlyArray<string | null> = [
  'Excellent service, very professional.',
  'Quick response and fair price. Would use again!',
  'Très bien 👍 merci beaucoup',
  'He said "we\'ll call you back" and they did.',
  'Line one.\nLine two, after a newline.\n\nAnd a paragraph.',
  'Sehr zufrieden — schnelle Hilfe, freundliches Team.',
  '★★★★★ 🎉🎉 best experience so far',
  'Okay, nothing special.',
  'Waited 45 minutes past my appointment; staff apologised.',
  '',
  null,
  null,
];
const RATINGS = [5, 5, 5, 4.5, 4, 4, 3.5, 3, 2.5, 2, 1, 5];
const PROFESSIONAL_NAMES = ['Dana Whitfield', 'Ravi Menon', 'Élodie Garnier', 'Chen Jing', 'Marcus Bell'];

/** A flat copy of an ASCII string (see seededUuid for why it matters at a million rows). */
const flat = (text: string): string => Buffer.from(text, 'latin1').toString('latin1');

const pick = <T>(random: Random, options: readonly T[]): T => options[Math.floor(random() * options.length)]!;

/** The seeded reviews `offset .. offset + count - 1` of a company. All are public and not suppressed. */
export function seededReviews(
  store: Pick<Store, 'nextReviewNumber'>,
  company: Pick<Company, 'id' | 'ordinal'>,
  seed: number,
  offset: number,
  count: number,
): ReviewRecord[] {
  const professionals = PROFESSIONAL_NAMES.map((name, k) => ({
    id: seededUuid(makeRandom(mixSeed(seed, company.ordinal, 0x70726f, k))),
    name,
  }));
  const reviews = new Array<ReviewRecord>(count);
  // Distinct per index within the company (scramble32 is a bijection): ids can never collide.
  const idBase = mixSeed(seed, company.ordinal, 0x6964);
  const generator = new Mulberry32(0);
  const random: Random = () => generator.next();
  for (let n = 0; n < count; n++) {
    const i = offset + n;
    // Every seventh review shares its predecessor's timestamp, so ties on created_at (broken by id) are common.
    const slot = i % 7 === 3 ? i - 1 : i;
    const jitter = Math.floor(generator.reseed(mixSeed(seed, company.ordinal, slot, 0x74)).next() * STEP_MS);
    generator.reseed(mixSeed(seed, company.ordinal, i));
    const name = pick(random, FULL_NAMES);
    const professional = random() < 0.4 ? pick(random, professionals) : null;
    const anonymous = random() < 0.05;
    reviews[n] = {
      id: seededUuid(random, scramble32((idBase + i) >>> 0)),
      companyId: company.id,
      number: store.nextReviewNumber(),
      createdMs: SEED_ANCHOR_MS - slot * STEP_MS - jitter,
      rating: pick(random, RATINGS),
      comment: pick(random, COMMENTS),
      isVerified: random() < 0.8,
      reviewerName: anonymous ? null : name,
      reviewerEmail: anonymous || random() < 0.1 ? null : flat(`reviewer${i}.${company.ordinal}@example.com`),
      professionalId: professional?.id ?? null,
      professionalName: professional?.name ?? null,
      isPublic: true,
      suppressed: false,
    };
  }
  return reviews;
}

/** Appends `count` seeded reviews to a company (no webhook deliveries). */
export function seedCompany(store: Store, company: Company, count: number, seed: number): void {
  store.addSeededReviews(company, seededReviews(store, company, seed, company.seededCount, count));
}
