import { createHash } from 'node:crypto';
import { type Document, isMap, isScalar, isSeq, parseDocument } from 'yaml';
import { z } from 'zod';
import { slugCheck } from '../../partner-api/indexedText.js';
import type { NewLocation } from '../../partner-api/locations.js';
import { slugify } from '../../slugify.js';

/** A location of the file, with the slug it is found and created by. */
export interface LocationSpec {
  readonly kind: 'location';
  /** Its position in its list of the file: reports follow the file's order. */
  readonly index: number;
  /** `locations[2] "Downtown"`: how reports and errors name it. */
  readonly label: string;
  readonly body: NewLocation;
  /** True when the file gave no slug and it was derived (see `derivedLocationSlug`). */
  readonly derivedSlug: boolean;
}

export interface ProfessionalSpec {
  readonly kind: 'professional';
  readonly index: number;
  readonly label: string;
  readonly body: {
    readonly first_name: string;
    readonly last_name: string;
    readonly email: string;
    readonly slug: string;
    readonly active?: boolean | undefined;
  };
  readonly derivedSlug: boolean;
  /** The slug of the location it belongs to (in the file or already on the platform). */
  readonly location: string | undefined;
}

/** A record refused before anything is sent: which, and why. */
export interface InvalidRecord {
  readonly kind: 'location' | 'professional';
  readonly index: number;
  readonly label: string;
  readonly slug: string | null;
  readonly reason: string;
}

export interface ProvisionPlan {
  readonly locations: LocationSpec[];
  readonly professionals: ProfessionalSpec[];
  readonly invalid: InvalidRecord[];
  /** The slugs of the locations set aside (given, or derived from the name), with their labels. */
  readonly setAsideLocations: ReadonlyMap<string, string>;
}

const text = z.string({ error: 'must be a string' }).trim();
const required = text.min(1, 'must not be empty');
const optional = text.optional();
const active = z.boolean({ error: 'must be true or false' }).optional();
// A slug (a record's own, or its location's) is read in a URL before anything is created: one no
// URL can name (half a character) would fail the whole run, so its record is set aside instead.
const slugField = required.check(slugCheck).optional();

const locationSchema = z.strictObject({
  name: required,
  slug: slugField,
  address_1: optional,
  address_2: optional,
  city: optional,
  state: optional,
  zip: optional,
  active,
});

const professionalSchema = z.strictObject({
  first_name: required,
  last_name: required,
  email: z.email({ error: 'must be an email address' }),
  slug: slugField,
  location: slugField,
  active,
});

// A key whose every entry is commented out (`locations:` alone) is YAML's null: no records, as a
// key left out is, not a file refused whole.
const recordList = z
  .array(z.unknown(), { error: 'must be a list' })
  .nullish()
  .transform((records) => records ?? []);

const fileSchema = z.strictObject(
  {
    locations: recordList,
    professionals: recordList,
  },
  { error: (issue) => (issue.code === 'invalid_type' ? 'must be a mapping' : undefined) },
);

/**
 * A location without a slug gets the one the platform would generate from its name, so one
 * created earlier from its name alone is found. A second location of the same name in the file
 * needs a slug of its own. No hash of the name is added (as professionals get one of the email):
 * it would change the slug of every location already provisioned from a file without slugs. Two
 * names that derive one slug are told apart by name when the slug is found (see `provision`).
 */
export function derivedLocationSlug(name: string): string {
  return slugify(name, 'location');
}

/**
 * A professional without a slug gets one from the name plus six hex digits of the email's hash:
 * stable across runs (the email never changes), and never the slug of another person of the same
 * name, whose survey URL would otherwise be reported as this one's.
 */
export function derivedProfessionalSlug(firstName: string, lastName: string, email: string): string {
  const hash = createHash('sha256').update(email.trim().toLowerCase()).digest('hex').slice(0, 6);
  return `${slugify(`${firstName} ${lastName}`, 'professional').slice(0, 53)}-${hash}`;
}

function issueText(error: z.ZodError): string {
  const issue = error.issues[0]!;
  if (issue.code === 'unrecognized_keys') return `has an unknown field ${issue.keys.join(', ')}`;
  const field = issue.path.join('.');
  return field === '' ? issue.message : `${field} ${issue.message}`;
}

const labelOf = (
  list: string,
  index: number,
  record: unknown,
  key: (r: Record<string, unknown>) => unknown,
) => {
  const named =
    record !== null && typeof record === 'object' ? key(record as Record<string, unknown>) : undefined;
  return typeof named === 'string' && named.trim() !== ''
    ? `${list}[${index}] "${named.trim()}"`
    : `${list}[${index}]`;
};

/**
 * Reads a provisioning file (YAML, of which JSON is a subset): `{locations: [...], professionals:
 * [...]}` with the API's own field names. A file that is not such an object fails whole; a record
 * that is invalid, or repeats a slug or an email of an earlier one, is set aside with its reason
 * and the others go on.
 */
export function parseProvisionFile(source: string): ProvisionPlan {
  const { document, repeated } = readDocument(source);
  const file = fileSchema.safeParse(document ?? {});
  if (!file.success)
    throw new Error(`the file ${issueText(file.error)} (expected {locations: [...], professionals: [...]})`);

  const invalid: InvalidRecord[] = [];
  const slugsSeen = new Map<string, string>();
  const claim = (kind: 'location' | 'professional', index: number, slug: string, label: string): boolean => {
    const earlier = slugsSeen.get(`${kind}:${slug}`);
    if (earlier !== undefined) {
      invalid.push({
        kind,
        index,
        label,
        slug,
        reason: `slug ${slug} is already ${earlier}'s: give one of them a slug of its own`,
      });
      return false;
    }
    slugsSeen.set(`${kind}:${slug}`, label);
    return true;
  };

  const locations: LocationSpec[] = [];
  const setAsideLocations = new Map<string, string>();
  file.data.locations.forEach((record, index) => {
    const label = labelOf('locations', index, record, (r) => r.name);
    const setAside = (reason: string) => {
      invalid.push({ kind: 'location', index, label, slug: null, reason });
      const slug = intendedSlug(record);
      if (slug !== undefined && !setAsideLocations.has(slug)) setAsideLocations.set(slug, label);
    };
    const twice = repeated.get(`locations[${index}]`);
    if (twice !== undefined) {
      setAside(`has the field ${twice} twice`);
      return;
    }
    const parsed = locationSchema.safeParse(record);
    if (!parsed.success) {
      setAside(issueText(parsed.error));
      return;
    }
    const slug = parsed.data.slug ?? derivedLocationSlug(parsed.data.name);
    if (!claim('location', index, slug, label)) return;
    locations.push({
      kind: 'location',
      index,
      label,
      body: { ...parsed.data, slug },
      derivedSlug: parsed.data.slug === undefined,
    });
  });

  const emailsSeen = new Map<string, string>();
  const professionals: ProfessionalSpec[] = [];
  file.data.professionals.forEach((record, index) => {
    const label = labelOf('professionals', index, record, (r) => r.email);
    const setAside = (reason: string, slug: string | null = null) => {
      invalid.push({ kind: 'professional', index, label, slug, reason });
    };
    const twice = repeated.get(`professionals[${index}]`);
    if (twice !== undefined) {
      setAside(`has the field ${twice} twice`);
      return;
    }
    const parsed = professionalSchema.safeParse(record);
    if (!parsed.success) {
      setAside(issueText(parsed.error));
      return;
    }
    const { location, ...p } = parsed.data;
    const slug = p.slug ?? derivedProfessionalSlug(p.first_name, p.last_name, p.email);
    const email = p.email.toLowerCase();
    const sameEmail = emailsSeen.get(email);
    if (sameEmail !== undefined) {
      setAside(`email ${p.email} is already ${sameEmail}'s`, slug);
      return;
    }
    if (!claim('professional', index, slug, label)) return;
    emailsSeen.set(email, label);
    professionals.push({
      kind: 'professional',
      index,
      label,
      body: { ...p, slug },
      derivedSlug: p.slug === undefined,
      location,
    });
  });
  return { locations, professionals, invalid, setAsideLocations };
}

/**
 * The slug a location set aside would have had: a professional naming it is then told that its
 * location is the file's, set aside, not that the file has none of that slug.
 */
function intendedSlug(record: unknown): string | undefined {
  if (record === null || typeof record !== 'object') return undefined;
  const { slug, name } = record as Record<string, unknown>;
  if (typeof slug === 'string' && slug.trim() !== '') return slug.trim();
  return typeof name === 'string' && name.trim() !== '' ? derivedLocationSlug(name.trim()) : undefined;
}

/**
 * The file's document, and its records that give a field twice (`locations[2]` → `name`). JSON
 * allows a repeated name and YAML does not, and which of the two values was meant nobody can tell:
 * such a record is set aside like any bad record, while the others go on. A key repeated outside a
 * record, or any other error, refuses the whole file.
 */
function readDocument(source: string): { document: unknown; repeated: Map<string, string> } {
  const doc = parseDocument(source);
  const repeated = new Map<string, string>();
  for (const error of doc.errors) {
    const first = error.message.split('\n')[0];
    if (error.code !== 'DUPLICATE_KEY') throw new Error(`the file is neither YAML nor JSON: ${first}`);
    const record = recordRepeating(doc, error.pos[0]);
    if (record === undefined) throw new Error(`the file gives a key twice: ${first}`);
    repeated.set(record.at, record.field);
  }
  return { document: doc.toJS(), repeated };
}

/** The record of the file whose field begins at `offset`, and that field. */
function recordRepeating(doc: Document, offset: number): { at: string; field: string } | undefined {
  for (const list of ['locations', 'professionals']) {
    const records = doc.get(list, true);
    if (!isSeq(records)) continue;
    for (const [index, record] of records.items.entries()) {
      const key = isMap(record)
        ? record.items.find((p) => isScalar(p.key) && p.key.range?.[0] === offset)?.key
        : undefined;
      if (isScalar(key)) return { at: `${list}[${index}]`, field: String(key.value) };
    }
  }
  return undefined;
}
