import type { AddressInfo } from 'node:net';
import { untilAborted, valueWithin } from '../boundedWait.js';
import type { Config } from '../config/schema.js';
import type { Db } from '../db/connect.js';
import { JOB } from '../jobs/jobNames.js';
import { addCount, type RunCounts } from '../jobs/runCounts.js';
import type { JobSpec } from '../jobs/scheduler.js';
import type { Logger, SecretScrubber } from '../log.js';
import type { Metrics } from '../metrics.js';
import type { PartnerApi } from '../partner-api/client.js';
import { boundedClose } from '../serverClose.js';
import { ensureRegistration } from './ensure.js';
import { checkWebhookHealth, countHealth } from './health.js';
import { Inbox } from './inbox.js';
import { SigningSecrets } from './secrets.js';
import { loadTls, makeWebhookServer } from './server.js';

export interface ReceiverDeps {
  readonly config: Config;
  readonly log: Logger;
  readonly scrubber: SecretScrubber;
  readonly db: Db;
  readonly metrics: Metrics;
  /** The platform client; without it (API not configured) there is no registration or health poll. */
  readonly api: PartnerApi | undefined;
  /** Shutdown began: start-up stops waiting for the secrets (from a database that hangs, say). */
  readonly shutdown?: AbortSignal | undefined;
}

export interface WebhookReceiver {
  /** Where the receiver listens, e.g. `https://0.0.0.0:8080/webhooks/review-created`. */
  readonly url: string;
  readonly secrets: SigningSecrets;
  /** Why this replica should not take deliveries now, or undefined: for `/readyz`. */
  readinessProblem(): string | undefined;
  /** The receiver's scheduled job (the platform-side health poll), for the daemon to register. */
  readonly jobs: readonly JobSpec[];
  /**
   * Stops accepting, cuts connections without a delivery being handled after a short bound (see
   * boundedClose), lets deliveries being handled get their answers, then drains the inbox.
   */
  close(): Promise<void>;
}

/**
 * The webhook part of `run`: loads the secrets, serves the public receiver on HTTP_PORT (TLS when
 * configured), and with the API configured gives the daemon its health job, which ensures the
 * WEBHOOK_PUBLIC_URL registration and polls the platform's webhook list. That job is exclusive:
 * replicas starting together must not each register the URL (every review would come twice). Failures to reach the platform are logged and retried by the poll;
 * they never keep the receiver from starting.
 */
export async function startWebhookReceiver(deps: ReceiverDeps): Promise<WebhookReceiver> {
  const { config, log, db, metrics, api } = deps;
  const secrets = new SigningSecrets(config.webhook.secrets, deps.scrubber);
  await untilAborted(secrets.refresh(db), deps.shutdown);

  let registrationEnsured = config.webhook.publicUrl === undefined;
  const warnedUndeletable = new Set<string>();
  const warnedInexact = new Set<string>();
  const healthJob = async (api: PartnerApi, counts: RunCounts, signal?: AbortSignal) => {
    if (!registrationEnsured && config.webhook.publicUrl !== undefined) {
      const haveConfiguredSecrets = config.webhook.secrets.length > 0;
      const deps = { api, db, secrets, log, haveConfiguredSecrets, warnedUndeletable, warnedInexact };
      const done = await ensureRegistration(deps, config.webhook.publicUrl, signal);
      if (done.register) addCount(counts, 'registered');
      addCount(counts, 'removed', done.remove.length - done.undeleted.length);
      if (done.undeleted.length > 0) addCount(counts, 'not_removed', done.undeleted.length);
      // A duplicate the platform did not delete is tried again at the next run: one list and one
      // delete each time (ensure warns once per duplicate), and the health check below goes on;
      // so is a registration held back by a webhook whose id cannot be named (no `keep`).
      registrationEnsured = done.undeleted.length === 0 && (done.register || done.keep !== undefined);
    }
    countHealth(counts, await checkWebhookHealth({ api, db, secrets, log, warnedInexact }, signal));
  };
  const inbox = new Inbox({ db, log, metrics, commitTimeoutMs: config.webhook.commitTimeoutMs });
  const tls = loadTls(config.webhook);
  const server = makeWebhookServer({
    path: config.webhook.path,
    toleranceSeconds: config.webhook.toleranceSeconds,
    maxBodyBytes: config.webhook.maxBodyBytes,
    secrets: () => secrets.current(),
    // A delivery waits for the database no longer than for its commit: past that, the secrets
    // count as unchanged, as when the database fails, and it is refused as not verified.
    reloadSecrets: () => valueWithin(secrets.refreshSoon(db), config.webhook.commitTimeoutMs, false),
    inbox,
    log,
    metrics,
    tls,
  });
  const closeServer = boundedClose(server);
  try {
    await server.listen({ host: config.http.host, port: config.http.port });
  } catch (error) {
    await inbox.close();
    throw error;
  }
  const port = (server.server.address() as AddressInfo).port;
  const url = `${tls ? 'https' : 'http'}://${config.http.host}:${port}${config.webhook.path}`;
  log.info({ port, tls: tls !== undefined, path: config.webhook.path }, 'webhook receiver listening');

  const jobs: JobSpec[] = [];
  if (api !== undefined) {
    jobs.push({
      name: JOB.webhookHealth,
      schedule: config.webhook.healthCron,
      // Registers WEBHOOK_PUBLIC_URL and records the platform's list at once, while the receiver
      // already serves, even with the poll "off"; a platform that is down only delays this (the
      // next tick tries again). The webhook gauges follow from the run's record at the next
      // refresh of every replica's MirrorGauges (within 10 s), this one's included.
      runAtStart: true,
      run: (counts, signal) => healthJob(api, counts, signal),
    });
  } else if (config.webhook.publicUrl !== undefined) {
    log.warn('WEBHOOK_PUBLIC_URL is set but the API is not configured: nothing is registered');
  }
  if (secrets.current().length === 0 && config.webhook.publicUrl === undefined) {
    log.warn('webhook receiver has no signing secret: every delivery is refused until one is registered');
  }

  return {
    url,
    secrets,
    jobs,
    readinessProblem: () => inbox.readinessProblem(),
    close: async () => {
      await closeServer();
      await inbox.close();
    },
  };
}
