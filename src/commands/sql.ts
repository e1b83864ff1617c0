import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { constants, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command } from 'commander';
import { safeDecode } from '../config/schema.js';
import { commandAction } from '../context.js';
import { serveEmbedded } from '../db/embeddedSocket.js';

/** How psql is started: its arguments and the variables that carry the connection. */
interface PsqlLaunch {
  readonly args: string[];
  readonly env: Record<string, string>;
}

/** The secrets a connection URL may carry, which must not reach psql's argv. */
export interface UrlSecrets {
  /** The URL without them. */
  readonly url: string;
  readonly password: string | undefined;
  /** The client key's passphrase (libpq's `sslpassword` parameter). */
  readonly sslpassword: string | undefined;
}

/**
 * The URL without its password, which goes to psql in PGPASSWORD instead: argv is readable by
 * every user of the machine (ps), the environment is not. A password may also be a `password`
 * query parameter (pg and libpq read it there, pg in preference): it is taken out too, and so is
 * `sslpassword`, which libpq reads from no environment variable (see withServiceFile).
 */
export function splitPassword(url: string): UrlSecrets {
  let password: string | undefined;
  let sslpassword: string | undefined;
  let rest = url;
  // As pg reads it (WHATWG URL): the credentials end at the last `@` before the path, and the user
  // name at the first `:`, so a raw `@` in either is theirs. libpq splits at the first `@`: the
  // user name's is escaped for it.
  const match = /^(postgres(?:ql)?:\/\/)([^:/?#]*):([^/?#]*)@/.exec(url);
  if (match !== null) {
    rest = `${match[1]}${match[2]!.replaceAll('@', '%40')}@${url.slice(match[0].length)}`;
    password = safeDecode(match[3]!);
  }
  const query = rest.indexOf('?');
  if (query < 0) return { url: rest, password, sslpassword };
  const kept: string[] = [];
  for (const pair of rest.slice(query + 1).split('&')) {
    const [name, value = ''] = pair.split('=', 2);
    const key = safeDecode(name!);
    if (key === 'password') password = safeDecode(value);
    else if (key === 'sslpassword') sslpassword = safeDecode(value);
    else kept.push(pair);
  }
  return {
    url: rest.slice(0, query) + (kept.length > 0 ? `?${kept.join('&')}` : ''),
    password,
    sslpassword,
  };
}

/** The section of the temporary service file; a name no operator's file is likely to use. */
const SERVICE = 'review-mirror-sql';

/**
 * Runs `fn` with the variables that make libpq read `sslpassword` from a service file of its own
 * (mode 0600, in a fresh 0700 directory), removed again however `fn` ends: libpq has no
 * environment variable for it, and a passfile holds only passwords. A value the file cannot carry
 * is refused: libpq ends a service file's line at a line break and drops the whitespace that ends
 * it. A service named already (the URL's `service`, or PGSERVICE) would be shadowed by this file,
 * which libpq then reads instead of the operator's: refused too.
 */
async function withServiceFile<T>(
  sslpassword: string,
  url: string,
  fn: (env: Record<string, string>) => Promise<T>,
): Promise<T> {
  if (/[\r\n]|[ \t\v\f]$/.test(sslpassword)) {
    throw new Error(
      'sql: the sslpassword in DATABASE_URL ends with whitespace or holds a line break, which libpq cannot read from a service file: psql would be given it on its command line, readable by every user of the machine',
    );
  }
  if (/[?&]service=/.test(url) || (process.env.PGSERVICE ?? '') !== '') {
    throw new Error(
      "sql: DATABASE_URL has an sslpassword and a service is named (service= or PGSERVICE): put the sslpassword in that service file instead, so that it stays off psql's command line",
    );
  }
  const dir = await mkdtemp(join(tmpdir(), 'review-mirror-sql-'));
  try {
    const file = join(dir, 'pg_service.conf');
    await writeFile(file, `[${SERVICE}]\nsslpassword=${sslpassword}\n`, { mode: 0o600, flag: 'wx' });
    return await fn({ PGSERVICEFILE: file, PGSERVICE: SERVICE });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** PGOPTIONS making the mirror's schema the default, so `select * from reviews` works unqualified. */
function searchPathOptions(schema: string, inherited: string | undefined): string {
  // The schema is a plain lower-case identifier (the config allows nothing else): no escaping needed.
  return [inherited, `-c search_path=${schema},public`].filter(Boolean).join(' ');
}

/** Signals psql is sent on too, so that it ends before this process does (see runPsql). */
const FORWARDED_SIGNALS = ['SIGTERM', 'SIGHUP'] as const;

async function runPsql(launch: PsqlLaunch): Promise<number> {
  const child = spawn('psql', launch.args, { stdio: 'inherit', env: { ...process.env, ...launch.env } });
  // Ctrl-C in the session belongs to psql (it cancels the query); this process must outlive it.
  const ignore = () => {};
  // Told to stop (or its terminal gone), psql is told so too, and this process outlives it to
  // remove what it made for psql (a service file holding the sslpassword): by default it would
  // die at once, and leave psql running.
  const forward = (signal: NodeJS.Signals) => child.kill(signal);
  process.on('SIGINT', ignore);
  for (const signal of FORWARDED_SIGNALS) process.on(signal, forward);
  try {
    // `once(child, 'exit')` rejects with the raw error when psql cannot be started at all.
    const [code, signal] = (await once(child, 'exit').catch((error: NodeJS.ErrnoException) => {
      throw error.code === 'ENOENT'
        ? new Error(
            'psql not found on PATH: install the PostgreSQL client (e.g. apt install postgresql-client)',
          )
        : error;
    })) as [number | null, NodeJS.Signals | null];
    // A shell's convention for a child ended by a signal.
    return code ?? 128 + (signal === null ? 0 : (constants.signals[signal] ?? 0));
  } finally {
    process.off('SIGINT', ignore);
    for (const signal of FORWARDED_SIGNALS) process.off(signal, forward);
  }
}

/** `review-mirror sql [-c QUERY]`: a psql session on the mirror, on DATABASE_URL or the embedded database. */
export function sqlCommand(): Command {
  return new Command('sql')
    .description(
      'open psql on the mirror, on DATABASE_URL or the embedded database (search_path: its schema)',
    )
    .option('-c, --command <query>', 'run this query and exit (psql -c), for scripts')
    .action(
      commandAction(async (ctx, options: { command?: string }) => {
        const { db } = ctx.config;
        const passthrough =
          options.command === undefined ? [] : ['-v', 'ON_ERROR_STOP=1', '-c', options.command];
        const env: Record<string, string> = {
          PGOPTIONS: searchPathOptions(db.schema, process.env.PGOPTIONS),
          PGAPPNAME: 'review-mirror-sql',
        };
        if (db.url !== undefined) {
          const { url, password, sslpassword } = splitPassword(db.url);
          if (password !== undefined) env.PGPASSWORD = password;
          const launch = { args: [...passthrough, url], env };
          process.exitCode =
            sslpassword === undefined
              ? await runPsql(launch)
              : await withServiceFile(sslpassword, url, (service) =>
                  runPsql({ ...launch, env: { ...env, ...service } }),
                );
          return;
        }
        const served = await serveEmbedded(ctx.config.dataDir, db.schema);
        try {
          process.exitCode = await runPsql({
            args: [
              ...passthrough,
              '-h',
              served.host,
              '-p',
              String(served.port),
              '-U',
              'postgres',
              'postgres',
            ],
            env,
          });
        } finally {
          await served.close();
        }
      }),
    );
}
