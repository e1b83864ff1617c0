import { Command } from 'commander';
import { makeContext } from '../context.js';
import { runDaemon } from '../daemon.js';

/** `review-mirror run`: the daemon, logging to stdout. */
export function runCommand(): Command {
  return new Command('run')
    .description('run the daemon: migrations, scheduled sync, webhook receiver, health and metrics')
    .action(async () => runDaemon(makeContext()));
}
