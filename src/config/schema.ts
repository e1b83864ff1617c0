import { z } from 'zod';
import { FatalError } from '../errors.js';
import { MIN_SECRET_LENGTH } from '../log.js';
import { UNKNOWN_OUTCOME_POLICIES, type UnknownOutcomePolicy } from '../push/events/sendPolicy.js';
import { ENCODINGS, type Encoding } from '../push/readRecords.js';
import { cronProblem } from './cronSchedule.js';

/**
 * The whole configuration, parsed once from environment variables at start-up.
 * Keys of `envSchema` are the variable names, so every error names the variable the operator set.
 */

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/**
 * A number written in decimal, as an operator writes one, checked by `rules`. `z.coerce` also took
 * `0x50`, `1e3` and a value of spaces (which Number reads as 0): a typo became a port 0 or no
 * retries, silently.
 */
const decimal = (error: string, rules: (n: z.ZodNumber) => z.ZodNumber = (n) => n) =>
  z.preprocess(
    (v) => (typeof v === 'string' && /^\s*-?\d+(\.\d+)?\s*$/.test(v) ? Number(v) : v),
    rules(z.number({ error })),
  );

const port = (fallback: number) =>
  decimal('must be a TCP port number', (n) =>
    n.int('must be a whole number').min(0, 'must be from 0 to 65535').max(65535, 'must be from 0 to 65535'),
  ).default(fallback);

const positiveInt = (fallback: number) =>
  decimal('must be a number', (n) => n.int('must be a whole number').positive('must be > 0')).default(
    fallback,
  );

/**
 * The longest a timer can wait (2^31 - 1 ms; Node fires a longer one after 1 ms) and PostgreSQL's
 * largest statement_timeout: no duration may be longer.
 */
const MAX_SECONDS = 2_147_483;

/** The shortest wait between two reads of a polled queue: 0 would read it in a busy loop. */
const MIN_POLL_SECONDS = 0.1;

const secondsAtMost = (max: number, rules: (n: z.ZodNumber) => z.ZodNumber = (n) => n) =>
  decimal('must be a number of seconds', (n) => rules(n.max(max, `must be at most ${max}`)));

const seconds = (fallback: number, max = MAX_SECONDS) =>
  secondsAtMost(max, (n) => n.nonnegative('must be >= 0')).default(fallback);

/**
 * The shortest timeout on the database or the platform: one a healthy database or platform meets
 * with room to spare (each variable says why). Less failed every request, commit or statement, or
 * nearly, while the database or the platform, not the setting, looked at fault.
 */
const MIN_TIMEOUT_SECONDS = 1;

/** A timeout: 0 lifts it (`none` says what that leaves), any other is at least MIN_TIMEOUT_SECONDS. */
const timeoutSeconds = (fallback: number, none: string, why: string, max = MAX_SECONDS) =>
  secondsAtMost(max, (n) =>
    n.refine(
      (v) => v === 0 || v >= MIN_TIMEOUT_SECONDS,
      `must be 0 (${none}) or at least ${MIN_TIMEOUT_SECONDS}: ${why}`,
    ),
  ).default(fallback);

/**
 * The smallest tolerance of a webhook's timestamp (see WEBHOOK_TOLERANCE_SECONDS): about twice the
 * oldest a healthy platform's delivery is when checked (up to 1 s from the whole-second stamp,
 * under a second more of transfer and clock skew), so a slow body or a drifting clock still fits.
 */
const MIN_WEBHOOK_TOLERANCE_SECONDS = 5;

/**
 * The longest retention: a century. Far more leaves PostgreSQL's range in the cutoff each prune
 * computes (`now() - make_interval(days => N)`: "timestamp out of range", then "integer out of
 * range"), failing every run; and no one keeps a row longer than this.
 */
export const MAX_RETENTION_DAYS = 36_500;

const retentionDays = (fallback: number) =>
  decimal('must be a number of days', (n) =>
    n
      .int('must be a whole number')
      .positive('must be > 0')
      .max(
        MAX_RETENTION_DAYS,
        `must be at most ${MAX_RETENTION_DAYS} (100 years; to keep rows for good, set that)`,
      ),
  ).default(fallback);

// The log scrubber ignores shorter values, which would hide ordinary words.
const TOO_SHORT_TO_SCRUB = `a shorter value cannot be told from ordinary text, so it would not be hidden in logs`;

/** A control character (C0 or DEL): no part of a header value or of a secret anyone types. */
const isControlCharacter = (c: string) => c < ' ' || c === '\u007f';
const hasControlCharacter = (v: string) => [...v].some(isControlCharacter);

/**
 * Beyond Latin-1: no HTTP header value can carry it. undici (lib/core/util.js, isValidHeaderValue,
 * as Node's http) takes a tab, U+0020–U+007E and U+0080–U+00FF in a header value, written as one
 * byte each, and refuses any other value before sending it. The rest it refuses, C0 but the tab
 * and DEL, are control characters, refused apart (the tab too: no key holds one).
 */
const isBeyondLatin1 = (c: string) => c.codePointAt(0)! > 0xff;

/**
 * WEBHOOK_SECRETS's secrets: separated by commas (`old,new`, as documented) or line breaks (one
 * per line, as a secret file is usually written). Blanks around each are dropped.
 */
function webhookSecretsOf(value: string): string[] {
  return value
    .split(/[,\r\n]/)
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

const cron = (fallback: string) =>
  z
    .string()
    .trim()
    .default(fallback)
    .superRefine((v, ctx) => {
      if (v === 'off') return;
      const problem = cronProblem(v);
      if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
    });

const httpUrl = z
  .string()
  .trim()
  .refine((v) => URL.canParse(v) && /^https?:$/.test(new URL(v).protocol), 'must be an http(s) URL');

/**
 * A postgres:// URL as pg reads it. Credentials with no host (`postgres://u:pw@/db?host=/run/pg`,
 * a Unix socket) are valid for pg but not for WHATWG URL: parsed with a placeholder host.
 */
function parseDatabaseUrl(value: string): URL | undefined {
  if (URL.canParse(value)) return new URL(value);
  const withHost = value.replace(/^(postgres(?:ql)?:\/\/[^/?#]*@)(?=[/?#]|$)/, '$1localhost');
  return withHost !== value && URL.canParse(withHost) ? new URL(withHost) : undefined;
}

/** Why a postgres:// URL cannot be used, or undefined; never repeats the URL (it holds the password). */
function databaseUrlProblem(value: string): string | undefined {
  const url = parseDatabaseUrl(value);
  if (url === undefined) return 'not a URL';
  try {
    decodeURIComponent(url.username);
    decodeURIComponent(url.password);
    decodeURIComponent(url.pathname);
  } catch {
    return 'a bad percent-escape';
  }
  return undefined;
}

/** A postgres:// URL. The value holds the password: the messages say what is wrong, never what was given. */
const databaseUrl = z
  .string()
  .trim()
  .refine((v) => v === '' || /^postgres(ql)?:\/\//.test(v), 'must be a postgres:// URL')
  .refine(
    (v) => v === '' || databaseUrlProblem(v) === undefined,
    'must be a valid postgres:// URL (postgres://user:password@host:5432/database, the password percent-encoded)',
  )
  .transform((v) => (v === '' ? undefined : v))
  .optional();

const optionalText = z
  .string()
  .trim()
  .transform((v) => (v === '' ? undefined : v))
  .optional();

const identifier = z
  .string()
  .trim()
  .regex(/^[a-z_][a-z0-9_]{0,62}$/, 'must be a lower-case SQL identifier (letters, digits, _)');

/** The longest DB_SCHEMA: 63 bytes of a PostgreSQL name, less `_events_outbox` (see DB_SCHEMA). */
const MAX_SCHEMA_LENGTH = 63 - '_events_outbox'.length;

/** The CSV delimiters a file may be read with, besides a tab (`tab` or `\\t`). */
export const CSV_DELIMITERS = [',', ';', '|'] as const;

/** The delimiter `value` names, or undefined when it names none. */
export function delimiterOf(value: string): string | undefined {
  if (value === '\\t' || value.toLowerCase() === 'tab' || value === '\t') return '\t';
  return (CSV_DELIMITERS as readonly string[]).includes(value) ? value : undefined;
}

/** What DATABASE_URL reaches: PostgreSQL itself, or a pooler that hands out connections per transaction. */
export const DB_POOLERS = ['none', 'transaction'] as const;

export const envSchema = z
  .object({
    REVIEWS_API_URL: httpUrl
      // With a route in it too (…/api/v1/partner/reviews), every request went to a path holding
      // it twice, and failed as a 404 that named no setting.
      .refine(
        (v) => !URL.canParse(v) || !/\/api\/v1\/partner(\/|$)/i.test(new URL(v).pathname),
        "must be the platform's base URL, without /api/v1/partner or anything after it (review-mirror appends it)",
      )
      // Requests are made of the URL's origin and path: a query (a tenant, a token) or a fragment
      // would be dropped without a word.
      .refine(
        (v) => !URL.canParse(v) || (new URL(v).search === '' && new URL(v).hash === ''),
        'must not hold a query (?…) or a fragment (#…): review-mirror sends neither',
      )
      // A password there would be sent nowhere useful and hidden from no log: the key has its own.
      .refine((v) => {
        const url = URL.canParse(v) ? new URL(v) : undefined;
        return url === undefined || (url.username === '' && url.password === '');
      }, 'must not hold a user name or password: the platform takes REVIEWS_API_KEY, in a header')
      .optional(),
    // Sent as a header (x-api-key): a control character (a second line in REVIEWS_API_KEY_FILE)
    // or one beyond Latin-1 (a typographic quote, a zero-width space pasted with the key) failed
    // every request as a network error, retried, without ever saying the key was at fault. The
    // first such character is named by its place, never by itself.
    REVIEWS_API_KEY: optionalText
      .superRefine((v, ctx) => {
        const characters = [...(v ?? '')];
        const i = characters.findIndex((c) => isControlCharacter(c) || isBeyondLatin1(c));
        if (i === -1) return;
        const which = `character ${i + 1} of ${characters.length}`;
        ctx.addIssue({
          code: 'custom',
          message: isControlCharacter(characters[i]!)
            ? `must not hold a control character such as a line break (${which} is one; is REVIEWS_API_KEY_FILE more than one line?)`
            : `must hold only characters an HTTP header can carry (${which} is beyond Latin-1, such as a typographic quote or an invisible space pasted with the key): the key is sent in a header`,
        });
      })
      .refine(
        (v) => v === undefined || v.length >= MIN_SECRET_LENGTH,
        `must be at least ${MIN_SECRET_LENGTH} characters long: ${TOO_SHORT_TO_SCRUB}`,
      ),
    DATABASE_URL: databaseUrl,
    DATABASE_LISTEN_URL: databaseUrl,
    // The outbox's NOTIFY channel is named `<schema>_events_outbox`, and PostgreSQL refuses a
    // channel name past 63 bytes: a longer schema would make every enqueue_event fail, and with it
    // the partner's own transaction that called it.
    DB_SCHEMA: identifier
      .refine(
        (v) => v.length <= MAX_SCHEMA_LENGTH,
        `must be at most ${MAX_SCHEMA_LENGTH} characters: the events outbox's notification channel is named after it (<schema>_events_outbox), and PostgreSQL refuses a channel name longer than 63`,
      )
      .default('review_mirror'),
    DB_POOL_MAX: positiveInt(10),
    // A day: the client's own bound (this plus a margin) must stay a valid timer too. 0 lifts it.
    // PostgreSQL counts it in whole milliseconds and pg sends it truncated to them: under 1 ms it
    // went as 0, no limit at all. The floor is a second, not a millisecond: the daemon's statements
    // take milliseconds, but a healthy server's commits stall for up to ~150 ms behind the WAL's
    // fsync (docs/benchmarks.md), and migrations, prunes and lock waits take longer still.
    DB_STATEMENT_TIMEOUT_SECONDS: timeoutSeconds(
      300,
      'no limit',
      'less than a millisecond reaches PostgreSQL as 0, no limit at all, and less than a second would cancel ordinary statements on a healthy database',
      86_400,
    ),
    DB_POOLER: z.enum(DB_POOLERS, { error: `must be one of ${DB_POOLERS.join(', ')}` }).default('none'),
    JOB_LEASE_SECONDS: secondsAtMost(MAX_SECONDS, (n) =>
      n.int('must be a whole number').min(3, 'must be at least 3'),
    ).default(30),
    SYNC_RUNS_RETENTION_DAYS: retentionDays(90),
    DATA_DIR: z.string().trim().min(1, 'must not be empty').default('./data'),
    HTTP_PORT: port(8080),
    ADMIN_PORT: port(9464),
    HTTP_HOST: z.string().trim().min(1).default('0.0.0.0'),
    ADMIN_HOST: z.string().trim().min(1).default('0.0.0.0'),
    LOG_LEVEL: z.enum(LOG_LEVELS, { error: `must be one of ${LOG_LEVELS.join(', ')}` }).default('info'),
    // An hour: beyond it no orchestrator waits, and the shutdown deadline adds its closing bound.
    SHUTDOWN_GRACE_SECONDS: seconds(8, 3_600),

    // A connection to the platform is a TCP and a TLS handshake, two or three round trips across
    // the internet (up to some hundreds of ms); less than a second, every one could time out and
    // every request fail, retried, as if the platform were down. 0: undici's connect has no timeout
    // of its own (API_REQUEST_TIMEOUT_SECONDS still bounds the request).
    API_CONNECT_TIMEOUT_SECONDS: timeoutSeconds(
      5,
      'none',
      'a connection to the platform takes two or three round trips, so less could time out every one',
    ),
    // A page of up to 100 records, from a platform across the internet: less than a second, every
    // request could time out, retried until the budget, as if the platform were down.
    API_REQUEST_TIMEOUT_SECONDS: timeoutSeconds(
      30,
      'none',
      "a request takes round trips to the platform and the platform's own time, so less could time out every one",
    ),
    API_MAX_RETRIES: decimal('must be a number', (n) =>
      n.int('must be a whole number').min(0, 'must be >= 0'),
    ).default(6),
    API_RETRY_BUDGET_SECONDS: seconds(120),
    API_PAGE_SIZE: decimal('must be a number', (n) =>
      n.int('must be a whole number').min(1, 'must be from 1 to 100').max(100, 'must be from 1 to 100'),
    ).default(100),

    SYNC_REVIEWS_CRON: cron('* * * * *'),
    SYNC_DIRECTORY_CRON: cron('*/15 * * * *'),
    SYNC_RECONCILE_CRON: cron('17 3 * * *'),
    SYNC_OVERLAP_SECONDS: seconds(600),
    DIRECTORY_DETAIL_CONCURRENCY: positiveInt(4),

    REVIEW_MIRROR_CONFIG: optionalText,
    CONTACTS_CONCURRENCY: positiveInt(4),
    CONTACTS_RATE_PER_SECOND: positiveInt(10),
    CONTACTS_LOG_RETENTION_DAYS: retentionDays(90),
    CRM_INBOX_DIR: optionalText,
    CRM_INBOX_CRON: cron('* * * * *'),
    CRM_INBOX_SETTLE_SECONDS: seconds(10),
    // As `contacts push --encoding` and `--delimiter` take them: the inbox reads what the CLI reads.
    CRM_INBOX_ENCODING: z
      .enum(ENCODINGS, { error: `must be one of ${ENCODINGS.join(', ')}` })
      .default('utf-8'),
    CRM_INBOX_DELIMITER: optionalText.refine(
      (v) => v === undefined || delimiterOf(v) !== undefined,
      `must be one of ${CSV_DELIMITERS.join(' ')} or tab (unset: detected from the header line)`,
    ),
    EVENTS_CONCURRENCY: positiveInt(4),
    EVENTS_RATE_PER_SECOND: positiveInt(10),
    EVENTS_MAX_ATTEMPTS: positiveInt(10),
    EVENTS_UNKNOWN_OUTCOME: z
      .enum(UNKNOWN_OUTCOME_POLICIES, { error: `must be one of ${UNKNOWN_OUTCOME_POLICIES.join(', ')}` })
      .default('retry'),
    // Unset: 60, or twice API_REQUEST_TIMEOUT_SECONDS when that is more (see the check below).
    EVENTS_LEASE_SECONDS: secondsAtMost(MAX_SECONDS, (n) =>
      n.int('must be a whole number').positive('must be > 0'),
    ).optional(),
    // The outbox is read again this long after a read that found nothing: 0 read it in a busy loop.
    EVENTS_POLL_SECONDS: secondsAtMost(MAX_SECONDS, (n) =>
      n.min(
        MIN_POLL_SECONDS,
        `must be at least ${MIN_POLL_SECONDS}: the outbox is read again after this long, so less reads it in a busy loop`,
      ),
    ).default(5),
    EVENTS_RETENTION_DAYS: retentionDays(7),
    EVENTS_KEY_RETENTION_DAYS: retentionDays(400),
    PROVISION_WAIT_SECONDS: seconds(60),

    WEBHOOK_PATH: z.string().trim().startsWith('/', 'must start with /').default('/webhooks/review-created'),
    WEBHOOK_SECRETS: z
      .string()
      .optional()
      .superRefine((value, ctx) => {
        if (value === undefined || value.trim() === '') return;
        const secrets = webhookSecretsOf(value);
        if (secrets.length === 0) {
          ctx.addIssue({
            code: 'custom',
            message:
              'must list at least one secret: it holds only commas and line breaks (unset it for none)',
          });
        }
        // Which one by its place, never by its value.
        for (const [i, secret] of secrets.entries()) {
          const which = `secret ${i + 1} of ${secrets.length}`;
          if (hasControlCharacter(secret)) {
            ctx.addIssue({
              code: 'custom',
              message: `must not hold a control character such as a tab inside a secret (${which} does): secrets are separated by commas or line breaks, and no signing secret holds another control character`,
            });
          } else if (secret.length < MIN_SECRET_LENGTH) {
            ctx.addIssue({
              code: 'custom',
              message: `must hold secrets of at least ${MIN_SECRET_LENGTH} characters (${which} is shorter): ${TOO_SHORT_TO_SCRUB}`,
            });
          }
        }
      })
      .transform((v) => webhookSecretsOf(v ?? '')),
    // How far X-EE-Timestamp may be from this host's clock, either way (spec 6.3 recommends 300).
    // More than clock skew: the timestamp is in whole seconds (up to 1 s old when stamped), and it
    // is checked only once the body has crossed the internet and the operator's proxy (some
    // hundreds of ms), on a clock NTP keeps within tens, at worst hundreds, of ms of the platform's.
    // At 0 nearly every delivery of a healthy platform was refused (401 stale_timestamp), at 1 or 2
    // many were, at random. A few seconds more open no hole: a delivery replayed inside the window
    // is an event already stored (same data.id), answered `duplicate`.
    WEBHOOK_TOLERANCE_SECONDS: secondsAtMost(MAX_SECONDS, (n) =>
      n.min(
        MIN_WEBHOOK_TOLERANCE_SECONDS,
        `must be at least ${MIN_WEBHOOK_TOLERANCE_SECONDS}: a delivery's timestamp is in whole seconds and is checked once its body has arrived, so even a healthy platform's deliveries are a second or two old here, with both clocks kept by NTP, and less would refuse them (401 stale_timestamp); the platform recommends 300`,
      ),
    ).default(300),
    WEBHOOK_MAX_BODY_BYTES: positiveInt(1024 * 1024),
    // A commit takes about 1 ms, but a healthy server's stall for up to ~150 ms behind the WAL's
    // fsync (docs/benchmarks.md), and the first after an idle spell opens a connection (TCP, TLS,
    // authentication). Under a second, a healthy database's deliveries could be answered 503, each
    // time marking the replica not ready until a commit succeeds (Inbox.readinessProblem), and
    // those signed with a new secret refused before the stored ones are read again (it bounds that
    // read too).
    WEBHOOK_COMMIT_TIMEOUT_SECONDS: secondsAtMost(MAX_SECONDS, (n) =>
      n.min(
        MIN_TIMEOUT_SECONDS,
        `must be at least ${MIN_TIMEOUT_SECONDS}: a commit on a healthy database may take some hundreds of milliseconds, so less would answer deliveries 503 and mark the replica not ready`,
      ),
    ).default(5),
    WEBHOOK_PUBLIC_URL: z
      .string()
      .trim()
      .refine((v) => v === '' || (URL.canParse(v) && /^https?:$/.test(new URL(v).protocol)), 'must be a URL')
      .refine(
        (v) => v === '' || !URL.canParse(v) || publicUrlSchemeAccepted(new URL(v)),
        'must be an https:// URL: the platform refuses HTTP webhook URLs at registration (spec 4.6 and 8), so every run would fail to register it; http:// is taken only for a loopback host (localhost, 127.0.0.1, [::1]), which only a local sandbox delivers to',
      )
      .transform((v) => (v === '' ? undefined : v))
      .optional(),
    WEBHOOK_HEALTH_CRON: cron('*/5 * * * *'),
    TLS_CERT_FILE: optionalText,
    TLS_KEY_FILE: optionalText,
  })
  .superRefine((e, ctx) => {
    // The outbox sends a claim while at least 3/4 of its lease is left (it renews one that has less)
    // and cuts the request off 1/4 of a lease before the claim runs out: a request is given half a
    // lease at worst, so a shorter lease would cut off requests the timeout still allows
    // (docs/push.md, "Claims and leases"). A timeout of 0 is none: the claim is then the only bound.
    // Only a lease set by hand is refused: the default follows the timeout, so raising the
    // timeout alone never stops a deployment from starting.
    const timeout = e.API_REQUEST_TIMEOUT_SECONDS;
    if (e.EVENTS_LEASE_SECONDS !== undefined && e.EVENTS_LEASE_SECONDS < 2 * timeout) {
      ctx.addIssue({
        code: 'custom',
        path: ['EVENTS_LEASE_SECONDS'],
        message: `(${e.EVENTS_LEASE_SECONDS}) must be at least twice API_REQUEST_TIMEOUT_SECONDS (${timeout}), so at least ${2 * timeout}: an event's request is cut off a quarter of a lease before its claim runs out, so it may get only half a lease; raise EVENTS_LEASE_SECONDS or lower API_REQUEST_TIMEOUT_SECONDS`,
      });
    }
  });

export interface Config {
  readonly api: {
    /** Base URL of the platform; `/api/v1/partner/...` is appended. Absent until configured. */
    readonly url: string | undefined;
    readonly key: string | undefined;
    readonly connectTimeoutMs: number;
    readonly requestTimeoutMs: number;
    readonly maxRetries: number;
    readonly retryBudgetMs: number;
    readonly pageSize: number;
  };
  readonly db: {
    /** Real PostgreSQL when set; otherwise an embedded PGlite database under `dataDir`. */
    readonly url: string | undefined;
    readonly schema: string;
    readonly poolMax: number;
    /** Longest a statement may run on the server (0: no limit). */
    readonly statementTimeoutMs: number;
    /** `transaction`: DATABASE_URL is a transaction pooler (PgBouncer), so nothing may rely on a session. */
    readonly pooler: (typeof DB_POOLERS)[number];
  };
  readonly jobs: {
    /** How long a replica holds an exclusive job's lease without renewing it. */
    readonly leaseSeconds: number;
    /** How long a job's runs stay in `sync_runs` (its last successful one stays whatever its age). */
    readonly runRetentionDays: number;
  };
  readonly dataDir: string;
  readonly http: { readonly host: string; readonly port: number };
  readonly admin: { readonly host: string; readonly port: number };
  readonly logLevel: (typeof LOG_LEVELS)[number];
  readonly shutdownGraceMs: number;
  readonly sync: {
    readonly reviewsCron: string;
    readonly directoryCron: string;
    readonly reconcileCron: string;
    readonly overlapMs: number;
    readonly detailConcurrency: number;
  };
  /** The optional configuration file (the CRM export's mapping): its path. */
  readonly configFile: string | undefined;
  readonly contacts: {
    readonly concurrency: number;
    readonly ratePerSecond: number;
    readonly logRetentionDays: number;
    /** Where `run` picks up CRM exports; undefined: no inbox. */
    readonly inboxDir: string | undefined;
    readonly inboxCron: string;
    /** A file is read only once its size and time have not changed for this long. */
    readonly inboxSettleMs: number;
    readonly inboxEncoding: Encoding;
    /** Undefined: detected from each file's header line. */
    readonly inboxDelimiter: string | undefined;
  };
  readonly events: {
    readonly concurrency: number;
    readonly ratePerSecond: number;
    readonly maxAttempts: number;
    readonly unknownOutcome: UnknownOutcomePolicy;
    /** A claimed event not recorded by then is taken back (its worker is presumed dead). */
    readonly leaseMs: number;
    /** The outbox is read at least this often; NOTIFY wakes the sender sooner. */
    readonly pollMs: number;
    readonly retentionDays: number;
    readonly keyRetentionDays: number;
    /**
     * A direct connection for LISTEN: DATABASE_LISTEN_URL, else DATABASE_URL unless that is a
     * transaction pooler (which cannot hold a LISTEN); undefined: the outbox is polled only.
     */
    readonly listenUrl: string | undefined;
  };
  readonly provision: {
    /** How long `provision` waits for new records' survey URLs. */
    readonly waitMs: number;
  };
  readonly webhook: {
    readonly path: string;
    /** Secrets from the environment; secrets stored by `webhooks register` are added at run time. */
    readonly secrets: readonly string[];
    readonly toleranceSeconds: number;
    readonly maxBodyBytes: number;
    /** Longest a delivery waits for its commit before it is answered 503 (the platform retries). */
    readonly commitTimeoutMs: number;
    readonly publicUrl: string | undefined;
    readonly healthCron: string;
    readonly tlsCertFile: string | undefined;
    readonly tlsKeyFile: string | undefined;
  };
}

/**
 * Whether the platform can be asked to deliver to `url`: it takes HTTPS only (spec 4.6, 8). HTTP
 * is kept for a loopback host, which no platform on another machine could deliver to anyway: the
 * sandbox (`review-mirror sandbox --allow-http-webhooks`, the demo, the tests) registers such
 * URLs for a receiver running without TLS beside it.
 */
function publicUrlSchemeAccepted(url: URL): boolean {
  if (url.protocol === 'https:') return true;
  return url.hostname === 'localhost' || url.hostname === '[::1]' || /^127(\.\d{1,3}){3}$/.test(url.hostname);
}

/** Bad configuration: fatal (no retry helps until someone changes it), and exit code 2 at the CLI. */
export class ConfigError extends FatalError {
  override readonly name = 'ConfigError';
}

/** Parses already-resolved variables (see `loadConfig` for the `*_FILE` indirection). Pure. */
export function parseConfig(env: Record<string, string | undefined>): Config {
  const result = envSchema.safeParse(env);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    const variable = String(issue.path[0] ?? 'configuration');
    // Never echo the value: it may be a secret.
    throw new ConfigError(`invalid configuration: ${variable} ${issue.message}`);
  }
  const e = result.data;
  if (e.HTTP_PORT !== 0 && e.HTTP_PORT === e.ADMIN_PORT) {
    throw new ConfigError(
      `invalid configuration: HTTP_PORT and ADMIN_PORT must differ (both are ${e.HTTP_PORT}); the admin port must never be public`,
    );
  }
  if ((e.TLS_CERT_FILE === undefined) !== (e.TLS_KEY_FILE === undefined)) {
    throw new ConfigError('invalid configuration: TLS_CERT_FILE and TLS_KEY_FILE must be set together');
  }
  return deepFreeze({
    api: {
      url: e.REVIEWS_API_URL?.replace(/\/+$/, ''),
      key: e.REVIEWS_API_KEY,
      connectTimeoutMs: e.API_CONNECT_TIMEOUT_SECONDS * 1000,
      requestTimeoutMs: e.API_REQUEST_TIMEOUT_SECONDS * 1000,
      maxRetries: e.API_MAX_RETRIES,
      retryBudgetMs: e.API_RETRY_BUDGET_SECONDS * 1000,
      pageSize: e.API_PAGE_SIZE,
    },
    db: {
      url: e.DATABASE_URL,
      schema: e.DB_SCHEMA,
      poolMax: e.DB_POOL_MAX,
      statementTimeoutMs: e.DB_STATEMENT_TIMEOUT_SECONDS * 1000,
      pooler: e.DB_POOLER,
    },
    jobs: { leaseSeconds: e.JOB_LEASE_SECONDS, runRetentionDays: e.SYNC_RUNS_RETENTION_DAYS },
    dataDir: e.DATA_DIR,
    http: { host: e.HTTP_HOST, port: e.HTTP_PORT },
    admin: { host: e.ADMIN_HOST, port: e.ADMIN_PORT },
    logLevel: e.LOG_LEVEL,
    shutdownGraceMs: e.SHUTDOWN_GRACE_SECONDS * 1000,
    sync: {
      reviewsCron: e.SYNC_REVIEWS_CRON,
      directoryCron: e.SYNC_DIRECTORY_CRON,
      reconcileCron: e.SYNC_RECONCILE_CRON,
      overlapMs: e.SYNC_OVERLAP_SECONDS * 1000,
      detailConcurrency: e.DIRECTORY_DETAIL_CONCURRENCY,
    },
    configFile: e.REVIEW_MIRROR_CONFIG,
    contacts: {
      concurrency: e.CONTACTS_CONCURRENCY,
      ratePerSecond: e.CONTACTS_RATE_PER_SECOND,
      logRetentionDays: e.CONTACTS_LOG_RETENTION_DAYS,
      inboxDir: e.CRM_INBOX_DIR,
      inboxCron: e.CRM_INBOX_CRON,
      inboxSettleMs: e.CRM_INBOX_SETTLE_SECONDS * 1000,
      inboxEncoding: e.CRM_INBOX_ENCODING,
      inboxDelimiter: e.CRM_INBOX_DELIMITER === undefined ? undefined : delimiterOf(e.CRM_INBOX_DELIMITER),
    },
    events: {
      concurrency: e.EVENTS_CONCURRENCY,
      ratePerSecond: e.EVENTS_RATE_PER_SECOND,
      maxAttempts: e.EVENTS_MAX_ATTEMPTS,
      unknownOutcome: e.EVENTS_UNKNOWN_OUTCOME,
      leaseMs: (e.EVENTS_LEASE_SECONDS ?? Math.max(60, Math.ceil(2 * e.API_REQUEST_TIMEOUT_SECONDS))) * 1000,
      pollMs: e.EVENTS_POLL_SECONDS * 1000,
      retentionDays: e.EVENTS_RETENTION_DAYS,
      keyRetentionDays: e.EVENTS_KEY_RETENTION_DAYS,
      listenUrl: e.DATABASE_LISTEN_URL ?? (e.DB_POOLER === 'transaction' ? undefined : e.DATABASE_URL),
    },
    provision: { waitMs: e.PROVISION_WAIT_SECONDS * 1000 },
    webhook: {
      path: e.WEBHOOK_PATH,
      secrets: e.WEBHOOK_SECRETS,
      toleranceSeconds: e.WEBHOOK_TOLERANCE_SECONDS,
      maxBodyBytes: e.WEBHOOK_MAX_BODY_BYTES,
      commitTimeoutMs: e.WEBHOOK_COMMIT_TIMEOUT_SECONDS * 1000,
      publicUrl: e.WEBHOOK_PUBLIC_URL,
      healthCron: e.WEBHOOK_HEALTH_CRON,
      tlsCertFile: e.TLS_CERT_FILE,
      tlsKeyFile: e.TLS_KEY_FILE,
    },
  });
}

/** The API settings, for commands that talk to the platform; names the missing variable otherwise. */
export function requireApi(config: Config): { url: string; key: string } {
  if (config.api.url === undefined) {
    throw new ConfigError('invalid configuration: REVIEWS_API_URL is required for this command');
  }
  if (config.api.key === undefined) {
    throw new ConfigError(
      'invalid configuration: REVIEWS_API_KEY (or REVIEWS_API_KEY_FILE) is required for this command',
    );
  }
  return { url: config.api.url, key: config.api.key };
}

/**
 * Every secret value in the configuration, for the log scrubber. A database password shorter than
 * MIN_SECRET_LENGTH is accepted (refusing it would stop deployments that work) and listed, but the
 * scrubber cannot hide it alone: its URL is listed whole, so the URL is hidden wherever it appears.
 */
export function configSecrets(config: Config): string[] {
  const secrets = [
    config.api.key,
    ...databaseUrlSecrets(config.db.url),
    ...databaseUrlSecrets(config.events.listenUrl),
    ...config.webhook.secrets,
  ];
  return [...new Set(secrets.filter((s): s is string => s !== undefined && s !== ''))];
}

/**
 * The query parameters of a postgres:// URL that pg (pg-connection-string) reads as a secret:
 * `password` (it wins over the password before the `@`) and `sslpassword` (the client key's).
 */
const SECRET_URL_PARAMETERS = ['password', 'sslpassword'] as const;

/**
 * The secrets in a postgres:// URL, each as pg reads it and as written, and the URL itself when it
 * holds one. Empty when it holds none.
 */
function databaseUrlSecrets(value: string | undefined): string[] {
  if (value === undefined) return [];
  const url = parseDatabaseUrl(value);
  // Refused by the schema already; hidden whole if it ever gets here.
  if (url === undefined) return [value];
  const found: string[] = [];
  if (url.password !== '') found.push(url.password, safeDecode(url.password));
  for (const name of SECRET_URL_PARAMETERS) {
    for (const decoded of url.searchParams.getAll(name)) found.push(decoded);
  }
  // As written in the query (`a+b`, `p%26ss`), which URL-encoding the decoded value may not give.
  for (const pair of url.search.slice(1).split('&')) {
    const [name, written] = pair.split('=', 2);
    if (written !== undefined && (SECRET_URL_PARAMETERS as readonly string[]).includes(safeDecode(name!))) {
      found.push(written);
    }
  }
  const secrets = found.filter((s) => s !== '');
  return secrets.length === 0 ? [] : [value, ...secrets];
}

/** A URL part decoded, or as written when it is not valid percent-encoding. */
export function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object') {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}
