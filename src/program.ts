import { Command } from 'commander';

/**
 * Every command lives in `src/commands/`, one file and one factory each, loaded only when it is
 * run: `sync` then never loads the web server, the sandbox or the embedded database's socket, so a
 * one-shot command starts faster and holds less memory (a backfill's peak RSS is measured in
 * docs/benchmarks.md).
 */
const COMMANDS: Record<string, () => Promise<Command>> = {
  migrate: async () => (await import('./commands/migrate.js')).migrateCommand(),
  status: async () => (await import('./commands/status.js')).statusCommand(),
  state: async () => (await import('./commands/state.js')).stateCommand(),
  sync: async () => (await import('./commands/sync.js')).syncCommand(),
  run: async () => (await import('./commands/run.js')).runCommand(),
  sandbox: async () => (await import('./commands/sandbox.js')).sandboxCommand(),
  webhooks: async () => (await import('./commands/webhooks.js')).webhooksCommand(),
  contacts: async () => (await import('./commands/contacts.js')).contactsCommand(),
  events: async () => (await import('./commands/events.js')).eventsCommand(),
  provision: async () => (await import('./commands/provision.js')).provisionCommand(),
  demo: async () => (await import('./commands/demo.js')).demoCommand(),
  'grant-reader': async () => (await import('./commands/grantReader.js')).grantReaderCommand(),
  sql: async () => (await import('./commands/sql.js')).sqlCommand(),
};

/**
 * The CLI for `argv`: only the command it names, or every command when it names none it knows
 * (the program's help and its error for an unknown command list them all).
 */
export async function buildProgram(argv: readonly string[]): Promise<Command> {
  const program = new Command('review-mirror')
    .description('Keeps a Postgres mirror of your reviews on the review platform.')
    .showHelpAfterError()
    .exitOverride();
  const named = argv[2];
  const names = named !== undefined && Object.hasOwn(COMMANDS, named) ? [named] : Object.keys(COMMANDS);
  for (const name of names) {
    const command = await COMMANDS[name]!();
    // `addCommand` does not pass the program's settings down by itself (exit override, help after errors).
    program.addCommand(command.copyInheritedSettings(program));
  }
  return program;
}
