import type { Queryable, Tables } from '../db/queryable.js';

/** A lease as `status` shows it. */
export interface LeaseRow {
  readonly job: string;
  readonly holder: string;
  readonly token: string;
  readonly acquiredAt: Date;
  readonly expiresAt: Date;
  /** Whether `expiresAt` is still ahead on the database clock. */
  readonly held: boolean;
}

/**
 * Grants `job` to `holder` for `seconds` when nobody holds it (no row yet, or the holder's lease
 * ran out or was released), and returns the new fencing token; undefined while another holds it.
 * Every expiry is on the database clock, so replicas with skewed clocks still agree.
 */
export async function acquireLease(
  q: Queryable,
  db: Tables,
  job: string,
  holder: string,
  seconds: number,
): Promise<string | undefined> {
  const res = await q.raw(
    `insert into ?? as l (job, holder, token, expires_at)
     values (?, ?, 1, now() + make_interval(secs => ?))
     on conflict (job) do update
       set holder = excluded.holder, token = l.token + 1, acquired_at = now(), renewed_at = now(),
           expires_at = excluded.expires_at
       where l.expires_at <= now()
     returning token`,
    [db.table('job_leases'), job, holder, seconds],
  );
  const row = (res.rows as { token: string }[])[0];
  return row === undefined ? undefined : String(row.token);
}

/**
 * Extends the lease of token `token` by `seconds` from now. False when the token is no longer the
 * lease's (another replica took it over) or the lease has run out: the caller has lost it. An
 * expired lease is never revived, so a renewal that lands after the holder's own release (it was
 * in flight) cannot hold the job for another period with nobody running it.
 */
export async function renewLease(
  q: Queryable,
  db: Tables,
  job: string,
  token: string,
  seconds: number,
): Promise<boolean> {
  const rows = await q(db.table('job_leases'))
    .where({ job, token })
    .where('expires_at', '>', q.fn.now())
    .update({ expires_at: q.raw('now() + make_interval(secs => ?)', [seconds]), renewed_at: q.fn.now() })
    .returning('job');
  return rows.length > 0;
}

/** Frees the lease at once (it stays as the last holder's row) if `token` still holds it. */
export async function releaseLease(q: Queryable, db: Tables, job: string, token: string): Promise<void> {
  await q(db.table('job_leases')).where({ job, token }).update({ expires_at: q.fn.now() });
}

/**
 * The fence: true while `token` is still the lease's. Call it in the transaction of a write, last;
 * the row lock it takes makes a takeover (and a renewal) wait for that transaction, so no write of
 * the old holder can land after the new holder was granted the lease.
 */
export async function holdsLease(q: Queryable, db: Tables, job: string, token: string): Promise<boolean> {
  const row = await q(db.table('job_leases')).where({ job, token }).forShare().first('job');
  return row !== undefined;
}

/** Who holds what: every lease row, with whether it is still held. */
export async function readLeases(q: Queryable, db: Tables): Promise<LeaseRow[]> {
  const rows = await q(db.table('job_leases'))
    .select('job', 'holder', 'token', 'acquired_at', 'expires_at', q.raw('expires_at > now() as held'))
    .orderBy('job');
  return rows.map((r) => ({
    job: r.job,
    holder: r.holder,
    token: String(r.token),
    acquiredAt: r.acquired_at,
    expiresAt: r.expires_at,
    held: r.held === true,
  }));
}
