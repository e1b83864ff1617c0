import { writeFile } from 'node:fs/promises';
import { extname } from 'node:path';
import { stringify } from 'csv-stringify/sync';
import { alignColumns } from '../../status/alignColumns.js';
import type { ProvisionOutcome, ProvisionResult } from './provision.js';

const COLUMNS = ['kind', 'record', 'slug', 'outcome', 'id', 'survey_url', 'error'] as const;

/** Outcomes of a record that is on the platform, whose survey URL may still be missing. */
const HAS_RECORD: ReadonlySet<ProvisionOutcome> = new Set(['created', 'existed', 'exists']);

/** One line per record: outcome, kind, slug, id, and the survey URL or the error. */
export function formatProvisionReport(results: readonly ProvisionResult[]): string[] {
  const rows = results.map((r) => [
    r.outcome,
    r.kind,
    r.slug ?? '-',
    r.id ?? '-',
    [
      r.survey_url,
      r.error ?? (r.survey_url === null && HAS_RECORD.has(r.outcome) ? 'no survey URL yet' : null),
    ]
      .filter((v) => v !== null)
      .join('  '),
    r.record,
  ]);
  return alignColumns([['outcome', 'kind', 'slug', 'id', 'survey URL or error', 'record'], ...rows]);
}

/** The report for a mail merge: JSON when FILE ends in .json, CSV otherwise. */
export async function writeProvisionReport(file: string, results: readonly ProvisionResult[]): Promise<void> {
  const text =
    extname(file).toLowerCase() === '.json'
      ? `${JSON.stringify(results, COLUMNS as unknown as string[], 2)}\n`
      : stringify(
          results.map((r) => COLUMNS.map((c) => r[c] ?? '')),
          { header: true, columns: [...COLUMNS] },
        );
  await writeFile(file, text);
}
