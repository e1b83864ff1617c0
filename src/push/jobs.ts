import { loadConfigFile } from '../config/configFile.js';
import type { Config } from '../config/schema.js';
import type { JobSpec } from '../jobs/scheduler.js';
import { contactsInboxJob } from './contacts/inbox.js';
import type { PushContactsDeps } from './contacts/pushContacts.js';

/** The push jobs of `run`: the CRM inbox when CRM_INBOX_DIR is set. */
export function pushJobSpecs(deps: PushContactsDeps, config: Config): JobSpec[] {
  const { contacts } = config;
  if (contacts.inboxDir === undefined) return [];
  // Read once at start-up: a bad mapping stops `run` with its one line, like a bad variable.
  const { contacts: mapping, events } = loadConfigFile(config.configFile);
  return [
    contactsInboxJob(deps, {
      dir: contacts.inboxDir,
      schedule: contacts.inboxCron,
      settleMs: contacts.inboxSettleMs,
      mapping,
      rules: events.rules,
      push: {
        concurrency: contacts.concurrency,
        ratePerSecond: contacts.ratePerSecond,
        logRetentionDays: contacts.logRetentionDays,
        encoding: contacts.inboxEncoding,
        delimiter: contacts.inboxDelimiter,
      },
    }),
  ];
}
