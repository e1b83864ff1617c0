import { readFileSync } from 'node:fs';
import { type Config, ConfigError, parseConfig } from './schema.js';

/** Variables that may hold a secret and so may also be given as a file (the Docker-secrets convention). */
const FILE_VARIABLES = ['REVIEWS_API_KEY', 'WEBHOOK_SECRETS', 'DATABASE_URL', 'DATABASE_LISTEN_URL'] as const;

/**
 * The edge of configuration: resolves `X_FILE` indirections and empty values, then parses.
 * Nothing else in the program reads `process.env`.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const resolved: Record<string, string | undefined> = {};
  for (const [name, value] of Object.entries(env)) {
    // An empty variable means "not set", as in most shells' `VAR=` idiom; so does one of spaces,
    // which is a blank left in an env file, not a value.
    if (value !== undefined && value.trim() !== '') resolved[name] = value;
  }
  for (const name of FILE_VARIABLES) {
    const file = resolved[`${name}_FILE`];
    if (file === undefined) continue;
    if (resolved[name] !== undefined) {
      throw new ConfigError(`invalid configuration: set ${name} or ${name}_FILE, not both`);
    }
    let content: string;
    try {
      content = readFileSync(file, 'utf8').trim();
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? 'unreadable';
      throw new ConfigError(`invalid configuration: ${name}_FILE cannot be read (${code}: ${file})`);
    }
    // Not "unset", as an empty variable is: a secret file is named to give the value, and one that
    // is empty (a secret not yet written, a wrong mount) made DATABASE_URL_FILE run the daemon on
    // the embedded database, and REVIEWS_API_KEY_FILE disable the sync jobs, without a word.
    if (content === '') {
      throw new ConfigError(
        `invalid configuration: ${name}_FILE names an empty file: ${file} (write ${name} in it, or unset ${name}_FILE)`,
      );
    }
    resolved[name] = content;
  }
  return parseConfig(resolved);
}
