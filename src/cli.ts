#!/usr/bin/env node
import './v8Flags.js';
import { CommanderError } from 'commander';
import { loadConfig } from './config/load.js';
import { ConfigError, configSecrets } from './config/schema.js';
import { describeError } from './errors.js';
import { SecretScrubber } from './log.js';
import { buildProgram } from './program.js';

/** Every failure ends as one line on stderr: exit 2 for configuration, 1 for anything else. */
async function main(argv: string[]): Promise<void> {
  try {
    await (await buildProgram(argv)).parseAsync(argv);
  } catch (error) {
    if (error instanceof CommanderError) {
      process.exitCode = error.exitCode;
      return;
    }
    process.stderr.write(`review-mirror: ${scrubberOfEnvironment().scrub(describeError(error))}\n`);
    process.exitCode = error instanceof ConfigError ? 2 : 1;
  }
}

/**
 * An error's text may come from outside (a platform echoing the API key, a driver quoting the
 * connection string): the last line is scrubbed of every configured secret, like the logs.
 */
function scrubberOfEnvironment(): SecretScrubber {
  try {
    return new SecretScrubber(configSecrets(loadConfig(process.env)));
  } catch {
    return new SecretScrubber(); // a configuration error: its message never echoes a value
  }
}

/**
 * A defect that escapes every handler (an uncaught exception, an unhandled rejection) ends the
 * process as Node would, exit 1, but as any other failure does: one scrubbed line on stderr, not
 * Node's dump of the error and every property it carries, which may quote a secret.
 */
function endOnEscapedError(): void {
  const end = (error: unknown) => {
    process.stderr.write(
      `review-mirror: unexpected failure, stopping: ${scrubberOfEnvironment().scrub(describeError(error))}\n`,
    );
    process.exit(1);
  };
  process.on('uncaughtException', end);
  process.on('unhandledRejection', end);
}

endOnEscapedError();
await main(process.argv);
