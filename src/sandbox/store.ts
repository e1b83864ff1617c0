import { randomUUID } from 'node:crypto';
import { slugify } from '../slugify.js';
import { ContactIndex } from './contactIndex.js';
import { type Keyed, NewestFirst } from './keyset.js';
import { makeRandom, type Random, randomHex, reviewNumber } from './random.js';

/**
 * The sandbox platform's whole state, in memory and free of HTTP: companies with their keys,
 * reviews (kept in feed order for keyset paging), locations, professionals, contacts, events,
 * invites, webhooks and delivery records. Routes translate HTTP to these calls and back.
 */

/** A refusal the partner API reports as `{"error": message}` with `status`. */
export class SandboxError extends Error {
  override readonly name = 'SandboxError';
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export interface ReviewRecord extends Keyed {
  readonly id: string;
  readonly companyId: string;
  /** Platform-wide counter, scrambled into the `R-XXXXXXXX` review number. */
  readonly number: number;
  readonly createdMs: number;
  rating: number;
  comment: string | null;
  isVerified: boolean;
  reviewerName: string | null;
  reviewerEmail: string | null;
  professionalId: string | null;
  professionalName: string | null;
  isPublic: boolean;
  suppressed: boolean;
}

export interface Address {
  line1: string;
  line2: string;
  city: string;
  state: string;
  zip: string;
}

interface Provisioned {
  /** Creation order within the platform; list cursors are positions in it. */
  readonly seq: number;
  readonly createdMs: number;
  /** The default survey exists from this moment on; before it, `default_survey_url` reads null. */
  readonly surveyReadyMs: number;
  readonly surveyUrl: string;
  readonly profileUrl: string;
}

export interface LocationRecord extends Provisioned {
  readonly id: number;
  readonly slug: string;
  name: string;
  active: boolean;
  address: Address;
}

export interface ProfessionalRecord extends Provisioned {
  readonly id: string;
  readonly slug: string;
  firstName: string;
  lastName: string;
  email: string;
  active: boolean;
  locationId: number | null;
}

export interface ContactRecord {
  readonly id: string;
  email: string;
  name: string | null;
  externalId: string | null;
  professionalId: string | null;
  readonly createdMs: number;
  updatedMs: number;
}

export interface EventRecord {
  readonly id: string;
  readonly contactId: string;
  readonly email: string;
  readonly eventType: string;
  readonly professionalId: string | null;
  readonly metadata: Record<string, unknown> | null;
  readonly receivedMs: number;
}

export interface InviteRecord {
  readonly email: string;
  readonly professionalId: string;
  readonly sentMs: number;
}

export interface WebhookRecord {
  readonly id: string;
  readonly url: string;
  readonly events: string[];
  readonly description: string | null;
  isActive: boolean;
  readonly createdMs: number;
  readonly secret: string;
  lastError: string | null;
}

export interface DeliveryAttempt {
  atMs: number;
  status: number | null;
  error: string | null;
}

export interface DeliveryRecord {
  readonly id: string;
  readonly webhookId: string;
  readonly reviewId: string;
  readonly attempts: DeliveryAttempt[];
  state: 'pending' | 'delivered' | 'dropped';
  /** Set on the extra copy sent by the `duplicate` fault. */
  readonly duplicateOf: string | null;
}

export interface Company {
  readonly id: string;
  readonly name: string;
  readonly slug: string;
  /** Creation order on the platform; seeded data of company 0 is the same on every start. */
  readonly ordinal: number;
  /** Every review, feed order. */
  readonly all: NewestFirst<ReviewRecord>;
  /** Public, non-suppressed reviews, feed order: what the partner feed pages through. */
  readonly visible: NewestFirst<ReviewRecord>;
  seededCount: number;
  readonly locations: LocationRecord[];
  readonly professionals: ProfessionalRecord[];
  readonly contacts: ContactIndex;
  readonly events: EventRecord[];
  readonly invites: InviteRecord[];
  readonly webhooks: WebhookRecord[];
  readonly deliveries: DeliveryRecord[];
}

export interface ApiKeyRecord {
  readonly key: string;
  readonly companyId: string;
  active: boolean;
}

export interface ReviewInput {
  id?: string | undefined;
  created_at?: string | undefined;
  rating?: number | undefined;
  comment?: string | null | undefined;
  is_verified?: boolean | undefined;
  reviewer_name?: string | null | undefined;
  reviewer_email?: string | null | undefined;
  professional_id?: string | null | undefined;
  professional_name?: string | null | undefined;
  public?: boolean | undefined;
  suppressed?: boolean | undefined;
}

export interface LocationInput {
  name: string;
  slug?: string | undefined;
  address_1?: string | null | undefined;
  address_2?: string | null | undefined;
  city?: string | null | undefined;
  state?: string | null | undefined;
  zip?: string | null | undefined;
  active?: boolean | undefined;
}

export interface ProfessionalInput {
  first_name: string;
  last_name: string;
  email: string;
  slug?: string | undefined;
  location_id?: number | null | undefined;
  active?: boolean | undefined;
}

export interface ContactInput {
  email: string;
  name?: string | null | undefined;
  external_id?: string | null | undefined;
  professional_id?: string | null | undefined;
}

export interface EventInput {
  email?: string | undefined;
  contact_id?: string | undefined;
  event_type: string;
  professional_id?: string | null | undefined;
  metadata?: Record<string, unknown> | null | undefined;
}

export interface WebhookInput {
  url: string;
  events: string[];
  description?: string | null | undefined;
}

export interface StoreOptions {
  /** Delay between creating a location or professional and its default survey existing. */
  surveyDelayMs: number;
  /** Seeds the generated defaults of submitted reviews. */
  seed: number;
  now?: () => number;
}

/** Where profile and survey URLs point: a host that cannot exist, so nothing ever follows them. */
export const PUBLIC_SITE = 'https://reviews.sandbox.test';

export const SLUG_PATTERN = /^[a-z0-9-]+$/;

/** `base`, else `base-2`, `base-3`, ...: the first not already taken. */
export function uniqueSlug(base: string, taken: (slug: string) => boolean): string {
  if (!taken(base)) return base;
  for (let n = 2; ; n++) if (!taken(`${base}-${n}`)) return `${base}-${n}`;
}

const GENERATED_NAMES = [
  'Avery Quinn',
  'Jordan Blake',
  'Sam Rivera',
  'Noor Haddad',
  'Chloé Martin',
  'Kenji Sato',
];
const GENERATED_COMMENTS = [
  'Great service, would recommend.',
  'Quick and friendly.',
  'Good, but the wait was long.',
  null,
];
const GENERATED_RATINGS = [5, 5, 4.5, 4, 3.5, 3, 2, 1];

export class Store {
  readonly #options: StoreOptions;
  readonly #now: () => number;
  #random: Random;
  readonly companies = new Map<string, Company>();
  readonly keys = new Map<string, ApiKeyRecord>();
  /** Every review on the platform by id: suppress by id and duplicate-id checks. */
  readonly #reviews = new Map<string, ReviewRecord>();
  /** Professional emails, lower-cased: unique across the whole platform. */
  readonly #professionalEmails = new Set<string>();
  #reviewCounter = 0;
  #locationCounter = 0;
  #seq = 0;
  /** Called with the newly submitted public reviews (not seeded ones): webhook deliveries hang off it. */
  onReviewsCreated: (company: Company, reviews: ReviewRecord[]) => void = () => {};

  constructor(options: StoreOptions) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
    this.#random = makeRandom(options.seed);
  }

  now(): number {
    return this.#now();
  }

  /** Forgets everything, as if the process had just started. */
  clear(): void {
    this.companies.clear();
    this.keys.clear();
    this.#reviews.clear();
    this.#professionalEmails.clear();
    this.#reviewCounter = 0;
    this.#locationCounter = 0;
    this.#seq = 0;
    this.#random = makeRandom(this.#options.seed);
  }

  // --- companies and keys -------------------------------------------------------------------

  createCompany(
    input: { name?: string | undefined; apiKey?: string | undefined; id?: string | undefined } = {},
  ): {
    company: Company;
    apiKey: string;
  } {
    const apiKey = input.apiKey ?? `rm_test_${randomHex(20)}`;
    if (this.keys.has(apiKey)) throw new SandboxError(409, 'api_key is already in use');
    if (input.id !== undefined && this.companies.has(input.id)) throw new SandboxError(409, 'company exists');
    const ordinal = this.companies.size;
    const name = input.name ?? `Sandbox Company ${ordinal + 1}`;
    const company: Company = {
      id: input.id ?? `co_${randomHex(8)}`,
      name,
      slug: uniqueSlug(slugify(name, 'company'), (s) =>
        [...this.companies.values()].some((c) => c.slug === s),
      ),
      ordinal,
      all: new NewestFirst(),
      visible: new NewestFirst(),
      seededCount: 0,
      locations: [],
      professionals: [],
      contacts: new ContactIndex(),
      events: [],
      invites: [],
      webhooks: [],
      deliveries: [],
    };
    this.companies.set(company.id, company);
    this.keys.set(apiKey, { key: apiKey, companyId: company.id, active: true });
    return { company, apiKey };
  }

  company(companyId: string): Company {
    const company = this.companies.get(companyId);
    if (company === undefined) throw new SandboxError(404, 'company not found');
    return company;
  }

  addKey(companyId: string, key?: string): string {
    this.company(companyId);
    const apiKey = key ?? `rm_test_${randomHex(20)}`;
    if (this.keys.has(apiKey)) throw new SandboxError(409, 'api_key is already in use');
    this.keys.set(apiKey, { key: apiKey, companyId, active: true });
    return apiKey;
  }

  setKeyActive(key: string, active: boolean): void {
    const record = this.keys.get(key);
    if (record === undefined) throw new SandboxError(404, 'api key not found');
    record.active = active;
  }

  /** The company a partner request acts for: 401 for a missing or unknown key, 403 for a deactivated one. */
  authenticate(key: string | undefined): Company {
    const record = key === undefined || key === '' ? undefined : this.keys.get(key);
    if (record === undefined) throw new SandboxError(401, 'Missing or invalid API key');
    if (!record.active) throw new SandboxError(403, 'API key is deactivated');
    return this.company(record.companyId);
  }

  // --- reviews ------------------------------------------------------------------------------

  nextReviewNumber(): number {
    return this.#reviewCounter++;
  }

  hasReview(id: string): boolean {
    return this.#reviews.has(id);
  }

  /** Submits reviews as a reviewer would: every field may be given, the rest is generated. */
  submitReviews(companyId: string, inputs: readonly ReviewInput[]): ReviewRecord[] {
    const company = this.company(companyId);
    const batch = new Set<string>();
    for (const input of inputs) {
      if (input.id === undefined) continue;
      if (this.#reviews.has(input.id) || batch.has(input.id)) {
        throw new SandboxError(409, `review ${input.id} already exists`);
      }
      batch.add(input.id);
    }
    const created: ReviewRecord[] = [];
    for (const input of inputs) {
      const pick = <T>(options: readonly T[]): T => options[Math.floor(this.#random() * options.length)]!;
      const professional =
        input.professional_id == null
          ? undefined
          : company.professionals.find((p) => p.id === input.professional_id);
      const reviewerName = input.reviewer_name === undefined ? pick(GENERATED_NAMES) : input.reviewer_name;
      const review: ReviewRecord = {
        id: input.id ?? randomUUID(),
        companyId,
        number: this.nextReviewNumber(),
        createdMs: input.created_at === undefined ? this.#now() : Date.parse(input.created_at),
        rating: input.rating ?? pick(GENERATED_RATINGS),
        comment: input.comment === undefined ? pick(GENERATED_COMMENTS) : input.comment,
        isVerified: input.is_verified ?? this.#random() < 0.7,
        reviewerName,
        reviewerEmail:
          input.reviewer_email === undefined
            ? reviewerName === null
              ? null
              : `${slugify(reviewerName, 'reviewer').replaceAll('-', '.')}@example.com`
            : input.reviewer_email,
        professionalId: input.professional_id ?? null,
        professionalName:
          input.professional_name !== undefined
            ? input.professional_name
            : professional
              ? `${professional.firstName} ${professional.lastName}`
              : null,
        isPublic: input.public ?? true,
        suppressed: input.suppressed ?? false,
      };
      this.#addReview(company, review);
      created.push(review);
    }
    const announced = created.filter((r) => r.isPublic && !r.suppressed);
    if (announced.length > 0) this.onReviewsCreated(company, announced);
    return created;
  }

  #addReview(company: Company, review: ReviewRecord): void {
    this.#reviews.set(review.id, review);
    company.all.insert(review);
    if (review.isPublic && !review.suppressed) company.visible.insert(review);
  }

  /** The seeding fast path: one sort for the whole batch, no webhook deliveries. */
  addSeededReviews(company: Company, reviews: readonly ReviewRecord[]): void {
    for (const review of reviews) {
      if (this.#reviews.has(review.id)) throw new SandboxError(409, `review ${review.id} already exists`);
    }
    for (const review of reviews) this.#reviews.set(review.id, review);
    company.all.addMany(reviews);
    company.visible.addMany(reviews.filter((r) => r.isPublic && !r.suppressed));
    company.seededCount += reviews.length;
  }

  setSuppressed(reviewId: string, suppressed: boolean): ReviewRecord {
    const review = this.#reviews.get(reviewId);
    if (review === undefined) throw new SandboxError(404, 'review not found');
    if (review.suppressed === suppressed) return review;
    const company = this.company(review.companyId);
    review.suppressed = suppressed;
    if (!review.isPublic) return review;
    if (suppressed) company.visible.remove(review);
    else company.visible.insert(review);
    return review;
  }

  /**
   * One page of the feed: the reviews after `after` (exclusive, in feed order) and strictly newer
   * than `sinceMs`. Two binary searches and a slice, whatever the size of the feed.
   */
  reviewPage(
    company: Company,
    page: { limit: number; after: Keyed | null; sinceMs: number | null },
  ): { reviews: ReviewRecord[]; hasMore: boolean; offset: number } {
    const feed = company.visible;
    const start = page.after === null ? 0 : feed.upperBound(page.after);
    const end = page.sinceMs === null ? feed.size : feed.notNewerThan(page.sinceMs);
    if (start >= end) return { reviews: [], hasMore: false, offset: start };
    const stop = Math.min(start + page.limit, end);
    return { reviews: feed.slice(start, stop), hasMore: stop < end, offset: start };
  }

  // --- locations and professionals ----------------------------------------------------------

  #provision(companySlug: string, kind: 'locations' | 'professionals', slug: string): Provisioned {
    const createdMs = this.#now();
    return {
      seq: ++this.#seq,
      createdMs,
      surveyReadyMs: createdMs + this.#options.surveyDelayMs,
      surveyUrl: `${PUBLIC_SITE}/s/${randomHex(8)}`,
      profileUrl: `${PUBLIC_SITE}/${companySlug}/${kind}/${slug}`,
    };
  }

  #chooseSlug(given: string | undefined, name: string, fallback: string, taken: (s: string) => boolean) {
    if (given === undefined) return uniqueSlug(slugify(name, fallback), taken);
    if (!SLUG_PATTERN.test(given)) {
      throw new SandboxError(422, 'slug may contain only lowercase letters, digits and hyphens');
    }
    if (taken(given)) throw new SandboxError(422, 'slug is already taken');
    return given;
  }

  createLocation(company: Company, input: LocationInput): LocationRecord {
    const slug = this.#chooseSlug(input.slug, input.name, 'location', (s) =>
      company.locations.some((l) => l.slug === s),
    );
    const location: LocationRecord = {
      ...this.#provision(company.slug, 'locations', slug),
      id: ++this.#locationCounter,
      slug,
      name: input.name,
      active: input.active ?? true,
      address: {
        line1: input.address_1 ?? '',
        line2: input.address_2 ?? '',
        city: input.city ?? '',
        state: input.state ?? '',
        zip: input.zip ?? '',
      },
    };
    company.locations.push(location);
    return location;
  }

  createProfessional(company: Company, input: ProfessionalInput): ProfessionalRecord {
    const email = input.email.toLowerCase();
    if (this.#professionalEmails.has(email))
      throw new SandboxError(409, 'A user with this email already exists');
    if (input.location_id != null && !company.locations.some((l) => l.id === input.location_id)) {
      throw new SandboxError(422, 'location_id does not refer to a location of your company');
    }
    const slug = this.#chooseSlug(input.slug, `${input.first_name} ${input.last_name}`, 'professional', (s) =>
      company.professionals.some((p) => p.slug === s),
    );
    const professional: ProfessionalRecord = {
      ...this.#provision(company.slug, 'professionals', slug),
      id: randomUUID(),
      slug,
      firstName: input.first_name,
      lastName: input.last_name,
      email: input.email,
      active: input.active ?? true,
      locationId: input.location_id ?? null,
    };
    this.#professionalEmails.add(email);
    company.professionals.push(professional);
    company.invites.push({
      email: input.email,
      professionalId: professional.id,
      sentMs: professional.createdMs,
    });
    return professional;
  }

  /**
   * Activates or deactivates a location or professional, as the company can in its account (the
   * spec shows the flag, not the transition). It moves the record from one `active` listing to the other.
   */
  setDirectoryActive(
    company: Company,
    kind: 'locations' | 'professionals',
    slug: string,
    active: boolean,
  ): LocationRecord | ProfessionalRecord {
    const records: ReadonlyArray<LocationRecord | ProfessionalRecord> = company[kind];
    const record = records.find((r) => r.slug === slug);
    if (record === undefined) throw new SandboxError(404, `${kind.slice(0, -1)} not found`);
    record.active = active;
    return record;
  }

  /** Items of a list in creation order, filtered by `active`, after the sequence number `afterSeq`. */
  listPage<T extends { seq: number; active: boolean }>(
    items: readonly T[],
    page: { limit: number; active: boolean; afterSeq: number },
  ): { items: T[]; hasMore: boolean } {
    const matching = items.filter((i) => i.active === page.active && i.seq > page.afterSeq);
    return { items: matching.slice(0, page.limit), hasMore: matching.length > page.limit };
  }

  // --- contacts and events ------------------------------------------------------------------

  #professionalOf(company: Company, id: string | null | undefined): string | null | undefined {
    if (id == null) return id;
    if (!company.professionals.some((p) => p.id === id)) {
      throw new SandboxError(422, 'professional_id does not refer to a professional of your company');
    }
    return id;
  }

  /**
   * Matches on external_id first, then on the email (case-insensitive): any contact of it when no
   * external_id is given, else only one without an external_id. Else creates.
   */
  upsertContact(company: Company, input: ContactInput): { contact: ContactRecord; created: boolean } {
    const professionalId = this.#professionalOf(company, input.professional_id);
    // Spec 4.1 names external_id the upsert key: an external_id matches its own contact, or one
    // known by its email alone (made by an event), never a contact under another external_id,
    // which would merge two CRM records of one email and take the first one's key away.
    const externalId = input.external_id ?? undefined;
    const existing =
      externalId === undefined
        ? company.contacts.byEmail(input.email)
        : (company.contacts.byExternalId(externalId) ??
          company.contacts.byEmail(input.email, (c) => c.externalId === null));
    const now = this.#now();
    if (existing !== undefined) {
      company.contacts.update(existing, {
        email: input.email,
        externalId: input.external_id !== undefined ? input.external_id : existing.externalId,
      });
      if (input.name !== undefined) existing.name = input.name;
      if (professionalId !== undefined) existing.professionalId = professionalId;
      existing.updatedMs = now;
      return { contact: existing, created: false };
    }
    const contact: ContactRecord = {
      id: randomUUID(),
      email: input.email,
      name: input.name ?? null,
      externalId: input.external_id ?? null,
      professionalId: professionalId ?? null,
      createdMs: now,
      updatedMs: now,
    };
    company.contacts.add(contact);
    return { contact, created: true };
  }

  /** Records a lifecycle event; an email nobody knows becomes a new contact, as on the platform. */
  recordEvent(company: Company, input: EventInput): EventRecord {
    const professionalId = this.#professionalOf(company, input.professional_id) ?? null;
    let contact: ContactRecord | undefined;
    if (input.contact_id !== undefined) {
      contact = company.contacts.byId(input.contact_id);
      if (contact === undefined)
        throw new SandboxError(422, 'contact_id does not refer to a contact of your company');
    } else if (input.email !== undefined) {
      contact = this.upsertContact(company, { email: input.email }).contact;
    } else {
      throw new SandboxError(422, 'email or contact_id is required');
    }
    const event: EventRecord = {
      id: randomUUID(),
      contactId: contact.id,
      email: contact.email,
      eventType: input.event_type,
      professionalId,
      metadata: input.metadata ?? null,
      receivedMs: this.#now(),
    };
    company.events.push(event);
    return event;
  }

  // --- webhooks -----------------------------------------------------------------------------

  addWebhook(company: Company, input: WebhookInput): WebhookRecord {
    const webhook: WebhookRecord = {
      id: `wh_${randomHex(12)}`,
      url: input.url,
      events: [...new Set(input.events)],
      description: input.description ?? null,
      isActive: true,
      createdMs: this.#now(),
      secret: `whsec_${randomHex(32)}`,
      lastError: null,
    };
    company.webhooks.push(webhook);
    return webhook;
  }

  deleteWebhook(company: Company, id: string): WebhookRecord {
    const at = company.webhooks.findIndex((w) => w.id === id);
    if (at < 0) throw new SandboxError(404, 'webhook not found');
    return company.webhooks.splice(at, 1)[0]!;
  }
}

// --- wire shapes ------------------------------------------------------------------------------

const iso = (ms: number): string => new Date(ms).toISOString();

/** Spec 2.1. */
export function reviewJson(r: ReviewRecord) {
  return {
    id: r.id,
    review_number: reviewNumber(r.number),
    created_at: iso(r.createdMs),
    rating: r.rating,
    comment: r.comment,
    is_verified: r.isVerified,
    reviewer: { name: r.reviewerName, email: r.reviewerEmail },
    professional: { id: r.professionalId, name: r.professionalName },
  };
}

export const reviewTruthJson = (r: ReviewRecord) => ({
  ...reviewJson(r),
  public: r.isPublic,
  suppressed: r.suppressed,
});

const surveyUrl = (p: Provisioned, now: number): string | null =>
  now >= p.surveyReadyMs ? p.surveyUrl : null;

/** Spec 2.2. */
export const locationJson = (l: LocationRecord, now: number) => ({
  id: l.id,
  slug: l.slug,
  name: l.name,
  active: l.active,
  address: { ...l.address },
  profile_url: l.profileUrl,
  default_survey_url: surveyUrl(l, now),
  created_at: iso(l.createdMs),
});

/** Spec 2.3: list items leave out location_id; the email is never returned. */
export function professionalJson(p: ProfessionalRecord, now: number, withLocation: boolean) {
  return {
    id: p.id,
    slug: p.slug,
    first_name: p.firstName,
    last_name: p.lastName,
    active: p.active,
    ...(withLocation ? { location_id: p.locationId } : {}),
    profile_url: p.profileUrl,
    default_survey_url: surveyUrl(p, now),
    created_at: iso(p.createdMs),
  };
}

export const contactJson = (c: ContactRecord) => ({
  id: c.id,
  email: c.email,
  name: c.name,
  external_id: c.externalId,
  professional_id: c.professionalId,
  created_at: iso(c.createdMs),
  updated_at: iso(c.updatedMs),
});

export const eventJson = (e: EventRecord) => ({
  id: e.id,
  contact_id: e.contactId,
  email: e.email,
  event_type: e.eventType,
  professional_id: e.professionalId,
  metadata: e.metadata,
  received_at: iso(e.receivedMs),
  status: 'queued' as const,
});

export const webhookJson = (w: WebhookRecord) => ({
  id: w.id,
  url: w.url,
  events: [...w.events],
  is_active: w.isActive,
  created_at: iso(w.createdMs),
  description: w.description,
  last_error: w.lastError,
});

export const deliveryJson = (d: DeliveryRecord) => ({
  id: d.id,
  webhook_id: d.webhookId,
  review_id: d.reviewId,
  state: d.state,
  duplicate_of: d.duplicateOf,
  attempts: d.attempts.map((a) => ({ at: iso(a.atMs), status: a.status, error: a.error })),
});

/** Everything the sandbox knows about one company, for assertions. */
export function truthJson(company: Company, now: number) {
  return {
    company_id: company.id,
    name: company.name,
    reviews: company.all.items.map(reviewTruthJson),
    locations: company.locations.map((l) => locationJson(l, now)),
    professionals: company.professionals.map((p) => ({ ...professionalJson(p, now, true), email: p.email })),
    contacts: company.contacts.all.map(contactJson),
    events: company.events.map(eventJson),
    invites: company.invites.map((i) => ({
      email: i.email,
      professional_id: i.professionalId,
      sent_at: iso(i.sentMs),
    })),
    webhooks: company.webhooks.map((w) => ({ ...webhookJson(w), signing_secret: w.secret })),
    deliveries: company.deliveries.map(deliveryJson),
  };
}
