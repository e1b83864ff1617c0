import type { Knex } from 'knex';
import * as syncState from './001_sync_state.js';
import * as reviews from './002_reviews.js';
import * as directory from './003_directory.js';
import * as webhooks from './004_webhooks.js';
import * as jobRuns from './005_job_runs.js';
import * as reviewQuarantine from './006_review_quarantine.js';
import * as contacts from './007_contacts.js';
import * as commentsAndViews from './009_comments_and_views.js';
import * as contactPushStaging from './010_contact_push_staging.js';
import * as eventsOutbox from './011_events_outbox.js';
import * as jobLeases from './012_job_leases.js';
import * as directoryQuarantine from './013_directory_quarantine.js';
import * as eventKeysGate from './014_event_keys_gate.js';
import * as eventLapsesAndBounds from './015_event_lapses_and_bounds.js';
import * as contactUnavailableStreak from './016_contact_unavailable_streak.js';
import * as syncRunsRetention from './017_sync_runs_retention.js';
import * as eventSendStarts from './018_event_send_starts.js';
import * as enqueueExactNumbers from './019_enqueue_exact_numbers.js';
import * as contactGivenUp from './020_contact_given_up.js';
import * as contactOwedClears from './021_contact_owed_clears.js';
import * as eventFlagAndErrorMeaning from './022_event_flag_and_error_meaning.js';
import * as runInterruptionsAndKeyPruneIndex from './023_run_interruptions_and_key_prune_index.js';

export interface Migration {
  readonly name: string;
  up(knex: Knex, schema: string): Promise<void>;
}

/** Every migration, in order. Forward-only: a released migration is never edited, only followed. */
export const migrations: readonly Migration[] = [
  { name: '001_sync_state', up: syncState.up },
  { name: '002_reviews', up: reviews.up },
  { name: '003_directory', up: directory.up },
  { name: '004_webhooks', up: webhooks.up },
  { name: '005_job_runs', up: jobRuns.up },
  { name: '006_review_quarantine', up: reviewQuarantine.up },
  { name: '007_contacts', up: contacts.up },
  { name: '009_comments_and_views', up: commentsAndViews.up },
  { name: '010_contact_push_staging', up: contactPushStaging.up },
  { name: '011_events_outbox', up: eventsOutbox.up },
  { name: '012_job_leases', up: jobLeases.up },
  { name: '013_directory_quarantine', up: directoryQuarantine.up },
  { name: '014_event_keys_gate', up: eventKeysGate.up },
  { name: '015_event_lapses_and_bounds', up: eventLapsesAndBounds.up },
  { name: '016_contact_unavailable_streak', up: contactUnavailableStreak.up },
  { name: '017_sync_runs_retention', up: syncRunsRetention.up },
  { name: '018_event_send_starts', up: eventSendStarts.up },
  { name: '019_enqueue_exact_numbers', up: enqueueExactNumbers.up },
  { name: '020_contact_given_up', up: contactGivenUp.up },
  { name: '021_contact_owed_clears', up: contactOwedClears.up },
  { name: '022_event_flag_and_error_meaning', up: eventFlagAndErrorMeaning.up },
  { name: '023_run_interruptions_and_key_prune_index', up: runInterruptionsAndKeyPruneIndex.up },
];
