import type { Db } from '../db/connect.js';
import { pendingMigrations } from '../db/migrate.js';
import { JOB } from '../jobs/jobNames.js';
import { readLeases } from '../jobs/leaseSql.js';
import { countQuarantined, type QuarantineCounts } from '../mirror/quarantineSql.js';
import type { OutboxStats } from '../push/events/outboxSql.js';
import { alignColumns } from './alignColumns.js';
import { type ContactsStatus, formatContactsStatus, readContactsStatus } from './contactPushes.js';
import { formatMirrorCounts, type MirrorCounts, readMirrorCounts } from './mirrorCounts.js';
import { formatOutboxStatus, readOutboxStatus } from './outboxStatus.js';
import { hasTables, readApiKeyState, readJobStatuses } from './statusSql.js';
import { formatWebhookStatus, readWebhookStatus, type WebhookStatus } from './webhookStatus.js';

export interface JobStatus {
  job: string;
  watermark: string | null;
  walk_in_progress: boolean;
  last_run_started_at: string | null;
  last_run_finished_at: string | null;
  last_outcome: string | null;
  last_counts: Record<string, number> | null;
  last_error: string | null;
  /** The replica running the job now, and until when its lease lasts unless renewed; null when none. */
  held_by: string | null;
  held_until: string | null;
}

export interface StatusReport {
  pending_migrations: string[];
  jobs: JobStatus[];
  /**
   * The platform's side, deliberately not in /readyz: whether the API key was accepted at the last
   * attempt (null: unknown, the attempt failed before the platform accepted or refused it), and
   * when; null before any run.
   */
  platform?: { api_key_accepted: boolean | null; checked_at: string | null } | null;
  /** Known webhooks, their health and the webhook miss rate; null before migrations. */
  webhooks?: WebhookStatus | null;
  /** Row counts of reviews (total, removed, by source), locations and professionals; null before migrations. */
  mirror?: MirrorCounts | null;
  /** Review records that failed validation and were quarantined; null before migrations. */
  quarantine?: QuarantineCounts | null;
  /** Location and professional records that failed validation and were quarantined; null before migrations. */
  directory_quarantine?: QuarantineCounts | null;
  /** Contacts by outcome and the last pushes; null before migrations. */
  contacts?: ContactsStatus | null;
  /** The events outbox: backlog, oldest pending age, outcomes; null before migrations. */
  outbox?: OutboxStats | null;
}

/** The jobs whose every run calls the platform's API first (a contacts run may read no file). */
const API_JOBS = [
  JOB.reviews,
  JOB.reconcile,
  JOB.backfill,
  JOB.locations,
  JOB.professionals,
  JOB.webhookHealth,
];

const iso = (v: Date | string | null): string | null => (v === null ? null : new Date(v).toISOString());

/** Per job: its checkpoint and its latest run. */
export async function readStatus(db: Db): Promise<StatusReport> {
  const pending = await pendingMigrations(db);
  if (pending.length > 0 && !(await hasTables(db.knex, db, ['sync_state']))) {
    return { pending_migrations: pending, jobs: [] };
  }
  const rows = await readJobStatuses(db.knex, db);
  const leases = (await hasTables(db.knex, db, ['job_leases'])) ? await readLeases(db.knex, db) : [];
  const held = new Map(leases.filter((l) => l.held).map((l) => [l.job, l]));
  const key = await readApiKeyState(db.knex, db, API_JOBS);
  return {
    pending_migrations: pending,
    jobs: rows.map((r) => ({
      job: r.job,
      watermark: iso(r.watermark),
      walk_in_progress: Boolean(r.walk_in_progress),
      last_run_started_at: iso(r.started_at),
      last_run_finished_at: iso(r.finished_at),
      last_outcome: r.outcome ?? null,
      last_counts: r.counts ?? null,
      last_error: r.error ?? null,
      held_by: held.get(r.job)?.holder ?? null,
      held_until: iso(held.get(r.job)?.expiresAt ?? null),
    })),
    platform: key === undefined ? null : { api_key_accepted: key.accepted, checked_at: iso(key.at) },
    webhooks: await readWebhookStatus(db),
    mirror: await readMirrorCounts(db),
    quarantine: (await hasTables(db.knex, db, ['review_quarantine']))
      ? await countQuarantined(db.knex, db, 'review_quarantine')
      : null,
    directory_quarantine: (await hasTables(db.knex, db, ['directory_quarantine']))
      ? await countQuarantined(db.knex, db, 'directory_quarantine')
      : null,
    contacts: await readContactsStatus(db),
    outbox: await readOutboxStatus(db),
  };
}

export function formatStatus(report: StatusReport): string {
  const lines: string[] = [];
  if (report.pending_migrations.length > 0) {
    lines.push(`pending migrations: ${report.pending_migrations.join(', ')} (run \`review-mirror migrate\`)`);
  }
  lines.push('sync state:');
  if (report.jobs.length === 0) lines.push('  (no job has run yet)');
  const header = ['job', 'watermark', 'walk', 'last run', 'outcome', 'counts', 'error'];
  const table = report.jobs.map((j) => [
    j.job,
    j.watermark ?? '-',
    j.walk_in_progress ? 'in progress' : '-',
    j.last_run_started_at ?? '-',
    j.last_outcome ?? '-',
    j.last_counts
      ? Object.entries(j.last_counts)
          .map(([k, v]) => `${k}=${v}`)
          .join(' ')
      : '-',
    j.last_error ?? '',
  ]);
  if (table.length > 0) lines.push(...alignColumns([header, ...table]).map((l) => `  ${l}`));
  const running = report.jobs.filter((j) => j.held_by !== null);
  if (running.length > 0) {
    lines.push('running now (job leases):');
    const leaseRows = running.map((j) => [j.job, j.held_by ?? '', `until ${j.held_until} unless renewed`]);
    lines.push(...alignColumns([['job', 'replica', 'lease'], ...leaseRows]).map((l) => `  ${l}`));
  }
  if (report.platform) {
    const { api_key_accepted: accepted, checked_at: at } = report.platform;
    // Unknown, not "not reached": a platform answering 5xx was reached, and said nothing of the key.
    const verdict = accepted === true ? 'accepted' : accepted === false ? 'REFUSED' : 'unknown';
    lines.push(`platform: API key ${verdict} at the last attempt (${at ?? '-'})`);
  }
  lines.push(...formatMirrorCounts(report.mirror));
  lines.push(...formatQuarantine(report.quarantine, 'review records', 'review_quarantine'));
  lines.push(
    ...formatQuarantine(
      report.directory_quarantine,
      'location or professional records',
      'directory_quarantine',
    ),
  );
  lines.push(...formatWebhookStatus(report.webhooks));
  lines.push(...formatContactsStatus(report.contacts));
  lines.push(...formatOutboxStatus(report.outbox));
  return lines.join('\n');
}

function formatQuarantine(
  counts: QuarantineCounts | null | undefined,
  what: string,
  table: string,
): string[] {
  if (!counts || counts.records === 0) return [];
  const last = counts.last_seen_at === null ? '-' : new Date(counts.last_seen_at).toISOString();
  return [`  quarantined    ${counts.records} invalid ${what} (last seen ${last}; table ${table})`];
}
