import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { type Db, openDb } from '../src/db/connect.js';
import { SandboxControl } from '../src/sandbox/controlClient.js';
import { makeRandom } from '../src/sandbox/random.js';
import { CLI, freePort, runCli as runCliProcess } from './processes.js';
import { startSandboxProcess } from './sandboxProcess.js';
import {
  type EventAttempt,
  type ExpectedReject,
  type ExpectedReport,
  type Output,
  type Person,
  type ProvisionedRecord,
  verify,
} from './soakVerify.js';

/**
 * `npm run soak [-- --seconds N --replicas N --seed S --restart-postgres | --embedded]`: the daemon
 * (one or two replicas) against the sandbox (`review-mirror sandbox`, its own process) while a
 * seeded driver does everything at once — reviews in bursts, suppressions, directory changes, CRM
 * exports with changed, duplicate and invalid rows, events through SQL, files and the CLI,
 * provisioning, API faults, duplicated and reordered webhooks, SIGKILLs, a database restart —
 * then, faults off, checks that the mirror and the platform agree exactly (bench/soakVerify.ts).
 * Prints one summary line; exits 1 naming every difference. The database is SOAK_DATABASE_URL,
 * else the local PostgreSQL; with --embedded, PGlite in a temporary DATA_DIR. See docs/soak.md.
 */
const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '600' },
    replicas: { type: 'string', default: '1' },
    seed: { type: 'string', default: '7' },
    // Restarts the PostgreSQL cluster of this machine once, halfway (pg_ctlcluster: needs root).
    'restart-postgres': { type: 'boolean', default: false },
    // One replica on the embedded database (PGlite) under a temporary DATA_DIR instead.
    embedded: { type: 'boolean', default: false },
  },
});
const SECONDS = Number(args.seconds);
const EMBEDDED = args.embedded === true;
// The embedded database belongs to one process: one replica, and no SQL from the driver meanwhile.
const REPLICAS = EMBEDDED ? 1 : Number(args.replicas);
const SEED = Number(args.seed);
const RESTART_POSTGRES = args['restart-postgres'] === true && !EMBEDDED;
const DATABASE_URL = EMBEDDED
  ? undefined
  : process.env.SOAK_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test';
const random = makeRandom(SEED);
/** The ticks of the two provisioning runs: early, so that the 20 s run of the suite reaches both. */
const PROVISION_TICKS = [2, 8] as const;
const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;

interface Replica {
  readonly env: NodeJS.ProcessEnv;
  readonly adminUrl: string;
  child: ChildProcess | undefined;
  /** When it was last started. */
  startedAt: number;
  log: string;
}

const differences: string[] = [];
const differ = (what: string) => {
  if (differences.length < 50) differences.push(what);
};

/** Every CLI run's output, scanned for secrets at the end. */
const cliOutputs: Output[] = [];

async function runCli(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; out: string }> {
  const run = await runCliProcess(args, env);
  const out = run.stdout + run.stderr;
  cliOutputs.push({ who: `\`review-mirror ${args.slice(0, 2).join(' ')}\``, text: out });
  return { code: run.code, out };
}

function start(replica: Replica): void {
  const child = spawn(process.execPath, [CLI, 'run'], {
    env: replica.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (replica.log += d));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (replica.log += d));
  replica.child = child;
  replica.startedAt = Date.now();
}

async function stop(replica: Replica, signal: NodeJS.Signals): Promise<void> {
  const child = replica.child;
  // Already gone (exited, or killed by a signal): no 'exit' is coming to wait for.
  if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill(signal);
  await exited;
}

/** Waits for `probe`; false (and a difference) when it is not reached in time. */
async function waitUntil(what: string, probe: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) {
      differ(`${what}: not reached within ${timeoutMs / 1000} s`);
      return false;
    }
    await sleep(500);
  }
  return true;
}

/**
 * Why a replica is not ready, for the summary: its /readyz answer, whether it still runs, and the
 * last lines of its log (the daemon's own, scrubbed of secrets, as the scan at the end checks).
 */
async function unreadyReplica(index: number, replica: Replica): Promise<string | undefined> {
  const answer = await fetch(`${replica.adminUrl}/readyz`).then(
    async (res) => (res.ok ? undefined : `${res.status} ${await res.text()}`),
    (error: unknown) => String(error),
  );
  if (answer === undefined) return undefined;
  const child = replica.child;
  const state =
    child === undefined || (child.exitCode === null && child.signalCode === null)
      ? 'running'
      : `exited ${child.exitCode ?? child.signalCode}`;
  const tail = replica.log
    .trimEnd()
    .split('\n')
    .slice(-5)
    .map((line) => line.slice(0, 300))
    .join(' | ');
  return `replica ${index}: /readyz ${answer.slice(0, 300)}; ${state}; last log lines: ${tail}`;
}

const csvCell = (v: string) => (/[",\n]/.test(v) ? `"${v.replaceAll('"', '""')}"` : v);

async function main(): Promise<void> {
  // The platform in its own process, as a deployment meets it.
  const sandbox = await startSandboxProcess(CLI, {
    seed: SEED,
    seedReviews: 300,
    timeScale: 0.01,
    surveyDelayMs: 500,
  });
  const control = new SandboxControl(sandbox.url);
  const schema = `soak_${randomBytes(4).toString('hex')}`;
  const work = await mkdtemp(join(tmpdir(), 'rm-soak-'));
  const inbox = join(work, 'inbox');
  await mkdir(inbox);
  const replicas: Replica[] = [];
  // Embedded: no DATABASE_URL at all, whatever the environment holds.
  const { DATABASE_URL: _inherited, ...environment } = process.env;
  for (let i = 0; i < REPLICAS; i++) {
    const httpPort = await freePort();
    const adminPort = await freePort();
    replicas.push({
      child: undefined,
      startedAt: 0,
      log: '',
      adminUrl: `http://127.0.0.1:${adminPort}`,
      env: {
        ...environment,
        ...(DATABASE_URL === undefined ? {} : { DATABASE_URL }),
        DB_SCHEMA: schema,
        DATA_DIR: join(work, `data-${i}`),
        REVIEWS_API_URL: sandbox.url,
        REVIEWS_API_KEY: sandbox.apiKey,
        HTTP_HOST: '127.0.0.1',
        HTTP_PORT: String(httpPort),
        ADMIN_HOST: '127.0.0.1',
        ADMIN_PORT: String(adminPort),
        // The platform delivers to the first replica; the poll covers whatever it misses.
        WEBHOOK_PUBLIC_URL: i === 0 ? `http://127.0.0.1:${httpPort}/webhooks/review-created` : '',
        SYNC_REVIEWS_CRON: '*/3 * * * * *',
        SYNC_DIRECTORY_CRON: '*/10 * * * * *',
        SYNC_RECONCILE_CRON: '*/45 * * * * *',
        WEBHOOK_HEALTH_CRON: '*/10 * * * * *',
        CRM_INBOX_DIR: inbox,
        CRM_INBOX_CRON: '*/2 * * * * *',
        CRM_INBOX_SETTLE_SECONDS: '1',
        EVENTS_POLL_SECONDS: '1',
        EVENTS_LEASE_SECONDS: '5',
        EVENTS_MAX_ATTEMPTS: '50',
        JOB_LEASE_SECONDS: '5',
        API_REQUEST_TIMEOUT_SECONDS: '2',
        LOG_LEVEL: 'info',
      },
    });
  }
  // The driver's own connection, as a partner application's; embedded, the daemon's database is
  // its alone, so it is opened only at the end, once the daemon has stopped.
  const openMirror = () =>
    openDb({ url: DATABASE_URL, schema, poolMax: 2, dataDir: EMBEDDED ? join(work, 'data-0') : undefined });
  let db: Db | undefined;
  let pauses = 0;
  /**
   * Runs a command that opens the database. Embedded, the daemon is stopped for it (SIGTERM, as an
   * operator would) and started again after: the data directory belongs to one process.
   */
  const withDatabase = async <T>(command: () => Promise<T>): Promise<T> => {
    if (!EMBEDDED) return command();
    await stop(replicas[0]!, 'SIGTERM');
    pauses++;
    try {
      return await command();
    } finally {
      start(replicas[0]!);
    }
  };
  const people = new Map<string, Person>();
  const events = new Map<string, EventAttempt>();
  const files = new Map<string, ExpectedReport>();
  const provisioned = { runs: 0, first: 0, second: 0, records: [] as ProvisionedRecord[] };
  let kills = 0;
  let restarted = false;
  let suppressed = 0;
  try {
    if (!EMBEDDED) db = await openMirror();
    for (const r of replicas) start(r);
    // Migrations done and the admin server up: then the driver starts.
    const ready = (r: Replica) =>
      fetch(`${r.adminUrl}/readyz`).then(
        (res) => res.ok,
        () => false,
      );
    const startedAll = await waitUntil(
      'first start',
      async () => (await Promise.all(replicas.map(ready))).every(Boolean),
      120_000,
    );
    if (!startedAll) {
      for (const [i, r] of replicas.entries()) {
        const why = await unreadyReplica(i, r);
        if (why !== undefined) differ(why);
      }
    }
    // The run's time counts from here: the embedded database's first start takes a while.
    const started = Date.now();

    const deadline = started + SECONDS * 1000;
    let nextKill = started + (SECONDS * 1000) / 5;
    let faultsOn = false;
    for (let tick = 0; Date.now() < deadline; tick++) {
      // Reviews: bursts and quiet spells.
      if (random() < 0.6) {
        const burst = random() < 0.2 ? 20 : Math.floor(random() * 4);
        if (burst > 0)
          await control.submitReviews(
            sandbox.companyId,
            Array.from({ length: burst }, () => ({})),
          );
      }
      if (tick % 15 === 7) {
        const visible = await control.visibleReviews(sandbox.companyId);
        if (visible.length > 0) {
          await control.suppress(pick(visible).id);
          suppressed++;
        }
      }
      if (tick % 40 === 20) {
        const truth = await control.truth(sandbox.companyId);
        const hidden = truth.reviews.filter((r) => r.suppressed);
        if (hidden.length > 0) {
          await control.unsuppress(pick(hidden).id);
          suppressed--;
        }
        const who = truth.professionals.length > 0 ? pick(truth.professionals) : undefined;
        if (who)
          await control.setDirectoryActive(sandbox.companyId, 'professionals', who.slug, random() < 0.5);
      }
      // A CRM export: new people, changed names, a duplicate row and an invalid one.
      if (tick % 10 === 3) {
        // Each row with its key (external_id; none for the invalid row), in file order.
        const rows: { line: string; key: string }[] = [];
        for (let n = 0; n < 8; n++) {
          const existing = people.size > 0 && random() < 0.4 ? pick([...people.values()]) : undefined;
          const person = existing ?? {
            email: `p${people.size}.${SEED}@soak.example`,
            externalId: `crm-${people.size}`,
            name: '',
          };
          person.name = `Person ${person.externalId} v${tick}`;
          people.set(person.email, person);
          rows.push({
            line: [person.email, person.name, person.externalId].map(csvCell).join(','),
            key: person.externalId,
          });
        }
        const again = pick([...people.values()]);
        again.name = `${again.name} (again)`;
        rows.push({
          line: [again.email, again.name, again.externalId].map(csvCell).join(','),
          key: again.externalId,
        });
        rows.push({ line: `not-an-email-${tick},Nobody,crm-bad-${tick}`, key: '' });
        // The report, by physical line (the header is line 1): the invalid row with no key, and
        // each row whose key comes again later in the file, replaced by that row, with its key.
        const expected = { rejected: new Map<number, ExpectedReject>(), valid: new Set<number>() };
        rows.forEach((row, i) => {
          const line = i + 2;
          const next = rows.findIndex((later, j) => j > i && later.key === row.key);
          if (row.key === '') expected.rejected.set(line, { key: '', field: 'email' });
          else if (next !== -1)
            expected.rejected.set(line, { key: row.key, field: '(row)', replacedBy: next + 2 });
          else expected.valid.add(line);
        });
        const name = `contacts-${String(files.size + 1).padStart(4, '0')}.csv`;
        files.set(name, expected);
        // Written elsewhere, then moved in whole, as an export job should.
        await writeFile(join(work, name), `email,name,external_id\n${rows.map((r) => r.line).join('\n')}\n`);
        await rename(join(work, name), join(inbox, name));
      }
      // Events from the partner's application, in its own transactions (none embedded: the daemon's
      // database has no other client).
      if (random() < 0.5 && db !== undefined) {
        const key = `soak-${SEED}-${tick}`;
        await db.knex
          .raw('select ??(?, ?, ?, ?::jsonb)', [
            `${schema}.enqueue_event`,
            `event${tick}@soak.example`,
            'matter.closed',
            key,
            JSON.stringify({ k: key }),
          ])
          // A call that failed (the database restarting) may still have committed: the outbox tells.
          .then(
            () => events.set(key, { source: 'sql', confirmed: true }),
            () => events.set(key, { source: 'sql', confirmed: false }),
          );
      }
      // Events also arrive as files in the inbox, and through the CLI.
      if (tick % 20 === 11) {
        const keys = [0, 1, 2].map((n) => `soak-file-${SEED}-${tick}-${n}`);
        const rows = keys.map((key) =>
          [key, `${key}@soak.example`, 'matter.closed', JSON.stringify({ k: key })].map(csvCell).join(','),
        );
        const name = `events-${String(files.size + 1).padStart(4, '0')}.csv`;
        files.set(name, { rejected: new Map(), valid: new Set(keys.map((_, i) => i + 2)) });
        await writeFile(join(work, name), `event_id,email,event_type,metadata\n${rows.join('\n')}\n`);
        await rename(join(work, name), join(inbox, name));
        for (const key of keys) events.set(key, { source: 'file', confirmed: false, file: name });
      }
      if (tick % 25 === 13) {
        const key = `soak-cli-${SEED}-${tick}`;
        const sent = await withDatabase(() =>
          runCli(
            [
              'events',
              'send',
              '--email',
              `${key}@soak.example`,
              '--type',
              'matter.closed',
              '--key',
              key,
              '--metadata',
              JSON.stringify({ k: key }),
            ],
            replicas[0]!.env,
          ),
        );
        // Exit 0: enqueued. Otherwise it may or may not have committed: the outbox tells.
        events.set(key, { source: 'cli', confirmed: sent.code === 0 });
      }
      // Locations come and go on the platform's side too.
      if (tick % 30 === 17) {
        // Through the partner API, faults and all: bounded, and a failure is just a branch not opened.
        await fetch(`${sandbox.url}/api/v1/partner/locations`, {
          method: 'POST',
          headers: { 'x-api-key': sandbox.apiKey, 'content-type': 'application/json' },
          body: JSON.stringify({ name: `Branch ${tick}`, slug: `branch-${tick}` }),
          signal: AbortSignal.timeout(3_000),
        })
          .then((res) => res.arrayBuffer())
          .catch(() => {});
        const { locations } = await control.truth(sandbox.companyId);
        if (locations.length > 0) {
          await control.setDirectoryActive(
            sandbox.companyId,
            'locations',
            pick(locations).slug,
            random() < 0.5,
          );
        }
      }
      // The database restarts once, halfway; embedded, the daemon it lives in is killed instead.
      if (EMBEDDED && !restarted && Date.now() > started + (SECONDS * 1000) / 2) {
        restarted = true;
        await stop(replicas[0]!, 'SIGKILL');
        start(replicas[0]!);
      }
      if (RESTART_POSTGRES && !restarted && Date.now() > started + (SECONDS * 1000) / 2) {
        restarted = true;
        const cluster = (await readdir('/etc/postgresql'))[0]!;
        const result = spawnSync('pg_ctlcluster', ['--skip-systemctl-redirect', cluster, 'main', 'restart'], {
          encoding: 'utf8',
        });
        if (result.status !== 0) differ(`PostgreSQL did not restart: ${result.stderr.trim()}`);
      }
      // Provisioning, twice, early (the 20 s run reaches both), faults on: the first run creates
      // (or finds) every record with its survey URL, the second creates nothing.
      if (tick === PROVISION_TICKS[0] || tick === PROVISION_TICKS[1]) {
        const run = tick === PROVISION_TICKS[0] ? 'first' : 'second';
        const file = join(work, 'team.yaml');
        const report = join(work, `provision-${run}.json`);
        await writeFile(
          file,
          `locations:\n  - {name: Soak Office, slug: soak-office}\nprofessionals:\n${[1, 2, 3]
            .map(
              (i) =>
                `  - {first_name: Soak, last_name: P${i}, email: soak${i}.${SEED}@soak.example, location: soak-office}`,
            )
            .join('\n')}\n`,
        );
        const result = await withDatabase(() =>
          runCli(['provision', file, '--report', report], replicas[0]!.env),
        );
        const results = await readFile(report, 'utf8').then(
          (text) => JSON.parse(text) as ProvisionedRecord[],
          () => [],
        );
        const allowed = run === 'first' ? ['created', 'existed'] : ['existed'];
        const wrong = results.filter((r) => !allowed.includes(r.outcome) || r.survey_url === null);
        if (result.code !== 0 || results.length !== 4 || wrong.length > 0)
          differ(
            `${run} provision (exit ${result.code}): ${results.length} of 4 records, ${wrong.map((r) => `${r.kind} ${r.slug} ${r.outcome}${r.survey_url === null ? ' without a survey URL' : ''}`).join(', ') || 'none wrong'}\n${result.out}`,
          );
        provisioned.runs++;
        provisioned.records.push(...results);
        provisioned[run] = results.filter((r) => r.outcome === 'created').length;
      }
      // Faults, on and off.
      if (tick % 30 === 0) {
        faultsOn = !faultsOn;
        await control.setFaults(
          faultsOn
            ? {
                partner: {
                  error500: 0.05,
                  error429: 0.03,
                  retryAfterSeconds: 1,
                  hang: 0.01,
                  truncated: 0.02,
                },
                webhooks: { duplicate: 0.3, reorder: true, failFirst: 1 },
              }
            : {},
        );
      }
      // A replica dies and comes back.
      if (Date.now() > nextKill) {
        const victim = pick(replicas);
        await stop(victim, 'SIGKILL');
        kills++;
        await sleep(2_000);
        start(victim);
        nextKill += (SECONDS * 1000) / 5;
      }
      await sleep(500);
    }

    // Faults off; everything drains; one reconcile and a full directory read.
    await control.setFaults({});
    await waitUntil(
      'inbox processed',
      // Nothing left to take, nor being pushed (processing/ is where a file is pushed from).
      async () =>
        (await readdir(inbox)).every((n) => ['processed', 'failed', 'processing'].includes(n)) &&
        (await readdir(join(inbox, 'processing')).catch(() => [])).length === 0,
      120_000,
    );
    // Embedded, the daemon's own gauge tells, read twice a poll apart. It is set after each drain
    // and reads 0 before the first: a daemon started less than 15 s ago is not asked yet.
    const backlog = async () =>
      db === undefined
        ? Date.now() - replicas[0]!.startedAt < 15_000
          ? Number.NaN
          : Number(
              /^review_mirror_outbox_backlog (\S+)$/m.exec(
                await fetch(`${replicas[0]!.adminUrl}/metrics`).then(
                  (res) => res.text(),
                  () => '',
                ),
              )?.[1] ?? Number.NaN,
            )
        : // Waiting for a replica: an event parked for an operator is not (see soakVerify).
          Number(
            (await db.knex(`${schema}.events_outbox`).whereIn('state', ['pending', 'sending']).count())[0]!
              .count,
          );
    await waitUntil(
      'outbox drained',
      async () => (await backlog()) === 0 && (await sleep(1_500)) === undefined && (await backlog()) === 0,
      120_000,
    );
    // The replicas stop (their logs complete), then one reconcile and a full directory read, and
    // the mirror stays still while it is compared.
    for (const r of replicas) await stop(r, 'SIGTERM');
    for (const target of [['reviews', '--full'], ['locations'], ['professionals', '--full']]) {
      const result = await runCli(['sync', ...target], replicas[0]!.env);
      if (result.code !== 0) differ(`sync ${target.join(' ')} failed: ${result.out.trim()}`);
    }
    db ??= await openMirror();
    if (!sandbox.alive()) differ(`the sandbox died:\n${sandbox.output()}`);
    if (provisioned.runs !== 2)
      differ(`provisioning ran ${provisioned.runs} of 2 times (the run is too short)`);
    const truth = await control.truth(sandbox.companyId);
    const summary = await verify(
      db,
      schema,
      truth,
      {
        people,
        events,
        files,
        provisioned: provisioned.records,
        outputs: [...replicas.map((r, i) => ({ who: `replica ${i}'s log`, text: r.log })), ...cliOutputs],
      },
      inbox,
      sandbox.apiKey,
      differ,
    );
    process.stdout.write(
      `soak: seconds=${SECONDS} replicas=${REPLICAS} seed=${SEED} database=${EMBEDDED ? 'embedded' : 'postgres'} ${Object.entries(
        summary,
      )
        .map(([k, v]) => `${k}=${v}`)
        .join(
          ' ',
        )} provision_created=${provisioned.first} provision_recreated=${provisioned.second} kills=${kills} ${EMBEDDED ? `pauses=${pauses} database_kills` : 'postgres_restarts'}=${restarted ? 1 : 0} suppressed_now=${suppressed} files=${files.size} differences=${differences.length}\n`,
    );
  } finally {
    for (const r of replicas) await stop(r, 'SIGTERM');
    if (!EMBEDDED) await db?.knex.raw('drop schema if exists ?? cascade', [schema]).catch(() => {});
    await db?.close();
    await sandbox.close();
    await rm(work, { recursive: true, force: true });
  }
  for (const d of differences) process.stderr.write(`soak: ${d}\n`);
  if (differences.length > 0) process.exitCode = 1;
}

await main();
