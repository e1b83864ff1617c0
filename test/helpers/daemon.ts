import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliEnv, freePort } from './cli.js';
import { TEST_DATABASE_URL, uniqueSchema } from './db.js';
import { seededDataDir } from './embeddedTemplate.js';

export interface DaemonSetup {
  readonly env: NodeJS.ProcessEnv;
  readonly schema: string;
  readonly dataDir: string;
  readonly httpPort: number;
  readonly adminPort: number;
  /** Where this daemon's receiver will listen: what WEBHOOK_PUBLIC_URL names. */
  readonly webhookUrl: string;
}

/**
 * The environment of a `review-mirror run` child process against `sandbox`: a schema (or an
 * embedded database directory) of its own and free loopback ports; `vars` add or override.
 */
export async function daemonSetup(
  sandbox: { url: string; apiKey: string },
  vars: Record<string, string | undefined> = {},
): Promise<DaemonSetup> {
  const schema = uniqueSchema('run');
  const dataDir = await mkdtemp(join(tmpdir(), 'rm-run-'));
  const httpPort = await freePort();
  const adminPort = await freePort();
  const env = cliEnv({
    DATABASE_URL: TEST_DATABASE_URL,
    DATA_DIR: dataDir,
    DB_SCHEMA: schema,
    HTTP_HOST: '127.0.0.1',
    HTTP_PORT: String(httpPort),
    ADMIN_HOST: '127.0.0.1',
    ADMIN_PORT: String(adminPort),
    REVIEWS_API_URL: sandbox.url,
    REVIEWS_API_KEY: sandbox.apiKey,
    ...vars,
  });
  if (env.DATABASE_URL === undefined) await seededDataDir(dataDir);
  const webhookUrl = `http://127.0.0.1:${httpPort}/webhooks/review-created`;
  return { env, schema, dataDir, httpPort, adminPort, webhookUrl };
}
