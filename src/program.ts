import { Command } from 'commander';
import { contactsCommand } from './commands/contacts.js';
import { demoCommand } from './commands/demo.js';
import { eventsCommand } from './commands/events.js';
import { grantReaderCommand } from './commands/grantReader.js';
import { migrateCommand } from './commands/migrate.js';
import { provisionCommand } from './commands/provision.js';
import { runCommand } from './commands/run.js';
import { sandboxCommand } from './commands/sandbox.js';
import { sqlCommand } from './commands/sql.js';
import { stateCommand } from './commands/state.js';
import { statusCommand } from './commands/status.js';
import { syncCommand } from './commands/sync.js';
import { webhooksCommand } from './commands/webhooks.js';

/** The CLI: every command lives in `src/commands/`, one file and one factory each. */
export function buildProgram(): Command {
  const program = new Command('review-mirror')
    .description('Keeps a Postgres mirror of your reviews on the review platform.')
    .showHelpAfterError()
    .exitOverride();
  for (const command of [
    migrateCommand(),
    statusCommand(),
    stateCommand(),
    syncCommand(),
    runCommand(),
    sandboxCommand(),
    webhooksCommand(),
    contactsCommand(),
    eventsCommand(),
    provisionCommand(),
    demoCommand(),
    grantReaderCommand(),
    sqlCommand(),
  ]) {
    // `addCommand` does not pass the program's settings down by itself (exit override, help after errors).
    program.addCommand(command.copyInheritedSettings(program));
  }
  return program;
}
