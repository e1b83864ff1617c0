import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';

/**
 * This process among the replicas: host, pid and a random suffix (pids repeat across containers,
 * and a restarted container keeps its host name). One value per process, so `sync_runs.replica`,
 * `job_leases.holder` and `events_outbox.claimed_by` name the same replica.
 */
export const REPLICA_ID = `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
