import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { constants } from 'node:os';
import { Command } from 'commander';
import { safeDecode } from '../config/schema.js';
import { commandAction } from '../context.js';
import { serveEmbedded } from '../db/embeddedSocket.js';

/** How psql is started: its arguments and the variables that carry the connection. */
interface PsqlLaunch {
  readonly args: string[];
  readonly env: Record<string, string>;
}

/**
 * The URL without its password, which goes to psql in PGPASSWORD instead: argv is readable by
 * every user of the machine (ps), the environment is not. A password may also be a `password`
 * query parameter (pg and libpq read it there, pg in preference): it is taken out too.
 */
export function splitPassword(url: string): { url: string; password: string | undefined } {
  let password: string | undefined;
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
  if (query < 0) return { url: rest, password };
  const kept: string[] = [];
  for (const pair of rest.slice(query + 1).split('&')) {
    const [name, value = ''] = pair.split('=', 2);
    if (safeDecode(name!) === 'password') password = safeDecode(value);
    else kept.push(pair);
  }
  return { url: rest.slice(0, query) + (kept.length > 0 ? `?${kept.join('&')}` : ''), password };
}

/** PGOPTIONS making the mirror's schema the default, so `select * from reviews` works unqualified. */
function searchPathOptions(schema: string, inherited: string | undefined): string {
  // The schema is a plain lower-case identifier (the config allows nothing else): no escaping needed.
  return [inherited, `-c search_path=${schema},public`].filter(Boolean).join(' ');
}

async function runPsql(launch: PsqlLaunch): Promise<number> {
  const child = spawn('psql', launch.args, { stdio: 'inherit', env: { ...process.env, ...launch.env } });
  // Ctrl-C in the session belongs to psql (it cancels the query); this process must outlive it.
  const ignore = () => {};
  process.on('SIGINT', ignore);
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
          const { url, password } = splitPassword(db.url);
          if (password !== undefined) env.PGPASSWORD = password;
          process.exitCode = await runPsql({ args: [...passthrough, url], env });
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
