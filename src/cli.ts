#!/usr/bin/env node
import { CommanderError } from 'commander';
import { ConfigError } from './config/schema.js';
import { describeError } from './errors.js';
import { buildProgram } from './program.js';

/** Every failure ends as one line on stderr: exit 2 for configuration, 1 for anything else. */
async function main(argv: string[]): Promise<void> {
  try {
    await buildProgram().parseAsync(argv);
  } catch (error) {
    if (error instanceof CommanderError) {
      process.exitCode = error.exitCode;
      return;
    }
    process.stderr.write(`review-mirror: ${describeError(error)}\n`);
    process.exitCode = error instanceof ConfigError ? 2 : 1;
  }
}

await main(process.argv);
