import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import type { Db } from '../src/db/connect.js';
import type { Truth } from '../src/sandbox/controlClient.js';

/**
 * The end of the soak: the mirror, the outbox, the inbox's reports and every output the driver
 * collected, checked against the sandbox's truth and against what the driver itself did. Each
 * disagreement is handed to `differ`, named; the counts come back for the summary line.
 */

/** A CRM contact as the driver last wrote it: what the platform must hold at the end. */
export interface Person {
  readonly email: string;
  readonly externalId: string;
  name: string;
}

/** An event the driver tried to enqueue, and whether its source was told it was enqueued. */
export interface EventAttempt {
  readonly source: 'sql' | 'cli' | 'file';
  /** SQL: the call returned; CLI: `events send` exited 0. A file's events: its file reached processed/. */
  readonly confirmed: boolean;
  /** The events file it was a row of. */
  readonly file?: string;
}

/** A line of a `.rejects.csv` (src/push/rejectReport.ts) as the driver expects it. */
export interface ExpectedReject {
  /** The contact's key (its external_id); '' for an invalid row, which has none. */
  readonly key: string;
  /** `email` for the invalid row (its email is not one); `(row)` for a replaced one. */
  readonly field: string;
  /** For a replaced row: the line of the next row of its key, which the reason names. */
  readonly replacedBy?: number;
}

/**
 * What a file's `.rejects.csv` must hold, row by row: each invalid row (by its line, with no key)
 * and each row a later row of the same key replaced (by its line and key). No other line.
 */
export interface ExpectedReport {
  readonly rejected: ReadonlyMap<number, ExpectedReject>;
  /** The lines that were sent: never in the report. */
  readonly valid: ReadonlySet<number>;
}

/** Output the driver read from a process: a replica's log, a CLI run, the sandbox's own is not one. */
export interface Output {
  readonly who: string;
  readonly text: string;
}

/** A line of a `provision --report` JSON report. */
export interface ProvisionedRecord {
  readonly kind: 'location' | 'professional';
  readonly slug: string | null;
  readonly outcome: string;
  readonly id: string | null;
  readonly survey_url: string | null;
}

export interface SoakRecord {
  readonly people: ReadonlyMap<string, Person>;
  readonly events: ReadonlyMap<string, EventAttempt>;
  /** Every file dropped into the inbox, by name. */
  readonly files: ReadonlyMap<string, ExpectedReport>;
  /** The records both provisioning runs reported: each one the platform's, with its survey URL. */
  readonly provisioned: readonly ProvisionedRecord[];
  readonly outputs: readonly Output[];
}

type Row = Record<string, unknown>;

/** What the mirror makes of text PostgreSQL cannot hold (src/mirror/reviewRow.ts): U+0000 becomes U+FFFD. */
const stored = (v: string | null) => (v === null ? null : v.replaceAll('\u0000', '\uFFFD'));
const time = (v: unknown) => (v === null || v === undefined ? null : new Date(v as string | Date).getTime());

/** The names of the fields whose mirrored value is not the platform's. */
function differingFields(row: Row, expected: Record<string, unknown>): string[] {
  return Object.entries(expected)
    .filter(([field, want]) => {
      const got = row[field];
      if (field === 'created_at') return time(got) !== time(want);
      if (field === 'rating') return Number(got) !== want;
      return (got ?? null) !== want;
    })
    .map(([field, want]) => `${field} ${JSON.stringify(row[field])} != ${JSON.stringify(want)}`);
}

export async function verify(
  db: Db,
  schema: string,
  truth: Truth,
  record: SoakRecord,
  inbox: string,
  apiKey: string,
  differ: (what: string) => void,
): Promise<Record<string, number>> {
  const t = (name: string) => `${schema}.${name}`;

  // Reviews: every one the mirror holds is the platform's, field by field; visible ones current,
  // hidden (suppressed or private) ones marked removed; none unknown to the platform.
  const mirror = new Map((await db.knex(t('reviews'))).map((r: Row) => [r.id as string, r]));
  let removed = 0;
  for (const review of truth.reviews) {
    const row = mirror.get(review.id);
    const visible = review.public && !review.suppressed;
    if (row === undefined) {
      if (visible) differ(`review ${review.id} visible but not in the mirror`);
      continue;
    }
    if (visible && row.removed_at !== null) differ(`review ${review.id} visible but removed in the mirror`);
    if (!visible) {
      if (row.removed_at === null)
        differ(`review ${review.id} hidden on the platform but current in the mirror`);
      else removed++;
    }
    const fields = differingFields(row, {
      review_number: stored(review.review_number),
      created_at: review.created_at,
      rating: review.rating,
      comment: stored(review.comment),
      is_verified: review.is_verified,
      reviewer_name: stored(review.reviewer.name),
      reviewer_email: stored(review.reviewer.email),
      professional_id: review.professional.id,
      professional_name: stored(review.professional.name),
    });
    if (fields.length > 0) differ(`review ${review.id} differs: ${fields.join('; ')}`);
  }
  const known = new Set(truth.reviews.map((r) => r.id));
  for (const id of mirror.keys()) if (!known.has(id)) differ(`review ${id} unknown to the platform`);

  // The directory: every record on both sides, every mirrored field the platform's.
  const directory = [
    [
      'locations',
      truth.locations.map((l) => ({
        id: String(l.id),
        slug: l.slug,
        fields: {
          slug: l.slug,
          name: l.name,
          active: l.active,
          address_line1: l.address.line1,
          address_line2: l.address.line2,
          address_city: l.address.city,
          address_state: l.address.state,
          address_zip: l.address.zip,
          profile_url: l.profile_url,
          default_survey_url: l.default_survey_url,
          created_at: l.created_at,
        },
      })),
    ],
    [
      'professionals',
      truth.professionals.map((p) => ({
        id: p.id,
        slug: p.slug,
        fields: {
          slug: p.slug,
          first_name: p.first_name,
          last_name: p.last_name,
          active: p.active,
          location_id: p.location_id,
          profile_url: p.profile_url,
          default_survey_url: p.default_survey_url,
          created_at: p.created_at,
        },
      })),
    ],
  ] as const;
  for (const [table, records] of directory) {
    const rows = new Map((await db.knex(t(table))).map((r: Row) => [String(r.id), r]));
    for (const record of records) {
      const row = rows.get(record.id);
      if (row === undefined) {
        differ(`${table} ${record.slug} missing from the mirror`);
        continue;
      }
      if (row.removed_at !== null)
        differ(`${table} ${record.slug} on the platform but removed in the mirror`);
      const fields = differingFields(row, record.fields);
      if (fields.length > 0) differ(`${table} ${record.slug} differs: ${fields.join('; ')}`);
    }
    const platform = new Set<string>(records.map((r) => r.id));
    for (const [id, row] of rows) {
      if (!platform.has(id))
        differ(`${table} ${String(row.slug)} (${id}) in the mirror, unknown to the platform`);
    }
  }

  // What provisioning printed is the platform's: the id of the record of that slug, its survey URL.
  for (const p of record.provisioned) {
    const records: readonly { id: string | number; slug: string; default_survey_url: string | null }[] =
      p.kind === 'location' ? truth.locations : truth.professionals;
    const platform = records.find((r) => String(r.id) === p.id);
    if (platform === undefined || platform.slug !== p.slug || platform.default_survey_url !== p.survey_url)
      differ(
        `provision reported ${p.kind} ${p.slug} as ${p.id} with ${p.survey_url}; the platform has ${platform === undefined ? 'no such id' : `${platform.slug} with ${platform.default_survey_url}`}`,
      );
  }

  // Contacts: each valid one on the platform with its latest content.
  const contacts = new Map(truth.contacts.map((c) => [c.email, c]));
  for (const person of record.people.values()) {
    const contact = contacts.get(person.email);
    if (contact === undefined) differ(`contact ${person.email} not on the platform`);
    else if (contact.name !== person.name || contact.external_id !== person.externalId) {
      differ(`contact ${person.email} is "${contact.name}", last exported "${person.name}"`);
    }
  }

  // Reports, row by row: every file the driver dropped has its report where the file went, holding
  // exactly its invalid and replaced rows.
  const moved = new Map<string, string>();
  const reports = new Map<string, Row[]>();
  for (const dir of ['processed', 'failed']) {
    for (const name of await readdir(join(inbox, dir)).catch(() => [] as string[])) {
      if (name.endsWith('.rejects.csv')) {
        const rows = parse(await readFile(join(inbox, dir, name), 'utf8'), { columns: true }) as Row[];
        reports.set(name.slice(0, -'.rejects.csv'.length), rows);
      } else moved.set(name, dir);
    }
  }
  let reported = 0;
  for (const [file, expected] of record.files) {
    if (moved.get(file) === undefined) differ(`file ${file} was not taken from the inbox`);
    const rows = reports.get(file);
    if (rows === undefined) {
      if (expected.rejected.size > 0) differ(`file ${file} has no report`);
      continue;
    }
    reported += rows.length;
    const seen = new Set<number>();
    for (const row of rows) {
      const line = Number(row.line);
      const got = `${row.field} ${row.key === '' ? '(no key)' : row.key}: ${row.reason}`;
      const want = expected.rejected.get(line);
      if (seen.has(line)) differ(`${file}: line ${line} is in the report twice`);
      seen.add(line);
      if (expected.valid.has(line)) differ(`${file}: line ${line}, a valid row, is in the report (${got})`);
      else if (want === undefined) differ(`${file}: line ${line} is in the report, not a row written`);
      else if (
        row.key !== want.key ||
        row.field !== want.field ||
        (want.replacedBy !== undefined &&
          !String(row.reason).startsWith(`replaced by line ${want.replacedBy} `))
      ) {
        differ(
          `${file}: line ${line} reported as "${got}", expected ${want.field} ${want.key === '' ? '(no key)' : want.key}${want.replacedBy === undefined ? '' : `, replaced by line ${want.replacedBy}`}`,
        );
      }
    }
    for (const line of expected.rejected.keys()) {
      if (!seen.has(line)) differ(`${file}: line ${line}, invalid or replaced, is not in the report`);
    }
  }
  for (const file of reports.keys())
    if (!record.files.has(file)) differ(`a report for ${file}, not a file written`);

  // Events. What counts as enqueued is what the outbox holds (or its sent keys): a source told so
  // must find its key there; one that saw an error (the database restarting under a SQL call or
  // the CLI) may have enqueued or not, and the outbox knows which. An enqueued key reaches the
  // platform exactly once, or — flagged a possible duplicate after a lost answer (a kill mid-send,
  // the database gone when the outcome was written) under the `retry` policy — no more often than
  // the outbox claimed it (`attempts`), since each claim sends at most once. A key never enqueued,
  // or one the driver never wrote, must not be on the platform at all.
  const sent = new Map<string, number>();
  for (const e of truth.events) {
    const key = String(e.metadata?.k);
    sent.set(key, (sent.get(key) ?? 0) + 1);
  }
  const outbox = new Map(
    (
      await db.knex(t('events_outbox')).select('idempotency_key', 'possible_duplicate', 'attempts', 'state')
    ).map((r: Row) => [
      r.idempotency_key as string,
      r as { possible_duplicate: boolean; attempts: number; state: string },
    ]),
  );
  const sentKeys = new Set(
    (await db.knex(t('event_keys')).select('idempotency_key')).map((r: Row) => r.idempotency_key as string),
  );
  let enqueued = 0;
  let unconfirmed = 0;
  let parked = 0;
  let duplicates = 0;
  for (const [key, attempt] of record.events) {
    const times = sent.get(key) ?? 0;
    const row = outbox.get(key);
    const inOutbox = row !== undefined || sentKeys.has(key);
    const confirmed =
      attempt.source === 'file' ? moved.get(attempt.file!) === 'processed' : attempt.confirmed;
    if (!confirmed) unconfirmed++;
    if (!inOutbox) {
      if (confirmed) differ(`event ${key} (${attempt.source}) was enqueued but is not in the outbox`);
      if (times > 0) differ(`event ${key} (${attempt.source}) not in the outbox, yet sent ${times} times`);
      continue;
    }
    enqueued++;
    // Parked after its outcome was unknown twice (a replica killed mid-send, twice): the policy's
    // own end under EVENTS_UNKNOWN_OUTCOME=retry (docs/push.md), flagged, the platform holding at
    // most the one copy of its first send; an operator decides (events retry / discard).
    if (row?.state === 'parked' && row.possible_duplicate && times <= 1) {
      parked++;
      continue;
    }
    if (row !== undefined && row.state !== 'sent') differ(`event ${key} ended ${row.state}`);
    if (times === 0) differ(`event ${key} (${attempt.source}) never sent`);
    if (times > 1) {
      duplicates += times - 1;
      if (row?.possible_duplicate !== true || times > row.attempts) {
        differ(
          `event ${key} sent ${times} times (flagged: ${row?.possible_duplicate}, claimed ${row?.attempts} times)`,
        );
      }
    }
  }
  for (const [key, times] of sent) {
    if (!record.events.has(key))
      differ(`event ${key} on the platform ${times} times, never enqueued by the driver`);
  }

  // Every delivery the daemon acknowledged is in the mirror.
  const acknowledged = new Set(
    truth.deliveries.filter((d) => d.state === 'delivered').map((d) => d.review_id),
  );
  for (const id of acknowledged)
    if (!mirror.has(id)) differ(`acknowledged delivery of ${id} not in the mirror`);

  // No secret in any output: the API key and every signing secret, the platform's current ones and
  // the mirror's record of those since deleted.
  const signingSecrets = new Set([
    ...truth.webhooks.map((w) => w.signing_secret),
    ...(await db.knex(t('webhooks')).whereNotNull('signing_secret').select('signing_secret')).map(
      (r: Row) => r.signing_secret as string,
    ),
  ]);
  for (const output of record.outputs) {
    if (output.text.includes(apiKey)) differ(`${output.who} printed the API key`);
    for (const secret of signingSecrets)
      if (output.text.includes(secret)) differ(`${output.who} printed a webhook signing secret`);
  }
  return {
    reviews: truth.reviews.length,
    removed,
    locations: truth.locations.length,
    professionals: truth.professionals.length,
    contacts: record.people.size,
    events: enqueued,
    events_unconfirmed: unconfirmed,
    events_parked: parked,
    duplicates,
    rejected: reported,
    webhooks_acknowledged: acknowledged.size,
    outputs_scanned: record.outputs.length,
    signing_secrets: signingSecrets.size,
  };
}
