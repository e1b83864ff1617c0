/**
 * A seeded CRM export of any size, as a CRM would write it (CSV, CRLF, a quoted name holding a
 * comma), with what pushing it must do known in advance: which keys are valid, which lines are
 * invalid (0.5% by default: a bad email), which lines a later row of the same key replaces, and —
 * for `version` 1 — which contacts changed since version 0. The same seed always gives the same
 * file, so the test and the benchmark push the same data.
 */
export interface CrmExportSpec {
  readonly people: number;
  readonly seed: number;
  /** 0: the first export; 1: the next one, with `changedShare` of the people renamed. */
  readonly version: 0 | 1;
  readonly changedShare?: number;
  readonly invalidShare?: number;
  readonly duplicateShare?: number;
}

export interface CrmExport {
  readonly csv: string;
  readonly rows: number;
  /** Key → the contact the platform must end with. */
  readonly contacts: ReadonlyMap<string, { readonly email: string; readonly name: string }>;
  readonly invalidLines: readonly number[];
  readonly replacedLines: readonly number[];
  /** Keys renamed in version 1. */
  readonly changedKeys: ReadonlySet<string>;
}

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const FIRST = ['Ana', 'Björn', 'Chloé', 'Dmitri', 'Élodie', 'Farid', 'Grace', 'Hiroshi', 'Inès', 'José'];
const LAST = ['Müller', 'García', 'Nguyen', 'Smith', "O'Brien", 'Kowalski', 'Rossi', 'Dubois'];

export function crmExport(spec: CrmExportSpec): CrmExport {
  const changedShare = spec.changedShare ?? 0.01;
  const invalidShare = spec.invalidShare ?? 0.005;
  const duplicateShare = spec.duplicateShare ?? 0.002;
  // One stream of draws per purpose, so version 1 differs from version 0 only by its renames.
  const layout = mulberry32(spec.seed);
  const renames = mulberry32(spec.seed ^ 0x5bd1e995);
  const lines: string[] = ['external_id,email,name'];
  const contacts = new Map<string, { email: string; name: string }>();
  const invalidLines: number[] = [];
  const replacedLines: number[] = [];
  const changedKeys = new Set<string>();
  const row = (key: string, email: string, name: string) =>
    lines.push(`${key},${email},"${name.replaceAll('"', '""')}"`);

  // A duplicate's winning row comes thousands of rows later: across the push's staging batches.
  const deferred: Array<{ at: number; key: string; email: string; name: string }> = [];
  const flush = (upTo: number) => {
    while (deferred.length > 0 && deferred[0]!.at <= upTo) {
      const d = deferred.shift()!;
      row(d.key, d.email, d.name);
    }
  };
  for (let i = 0; i < spec.people; i++) {
    flush(i);
    const key = `crm-${i}`;
    const email = `person${i}@example.com`;
    let name = `${LAST[Math.floor(layout() * LAST.length)]}, ${FIRST[Math.floor(layout() * FIRST.length)]}`;
    const renamed = renames() < changedShare;
    if (spec.version === 1 && renamed) {
      name = `${name} (updated)`;
      changedKeys.add(key);
    }
    if (layout() < invalidShare) {
      invalidLines.push(lines.length + 1);
      row(`bad-${i}`, `not-an-email-${i}`, name);
    }
    if (layout() < duplicateShare) {
      replacedLines.push(lines.length + 1);
      row(key, email, `${name} (old)`);
      deferred.push({ at: i + 2_500, key, email, name });
    } else row(key, email, name);
    contacts.set(key, { email, name });
  }
  flush(Number.POSITIVE_INFINITY);
  return {
    csv: `${lines.join('\r\n')}\r\n`,
    rows: lines.length - 1,
    contacts,
    invalidLines,
    replacedLines,
    changedKeys,
  };
}
