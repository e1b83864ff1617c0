import { appendFile, mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CliProcess, waitForHttp } from '../helpers/cli.js';
import { daemonSetup } from '../helpers/daemon.js';
import { dropSchema } from '../helpers/db.js';
import { scrapeMetrics } from '../helpers/metrics.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { waitFor } from '../helpers/wait.js';

const rows = (from: number, to: number) =>
  Array.from(
    { length: to - from },
    (_, i) => `crm-${from + i},p${from + i}@example.com,Person ${from + i}\n`,
  ).join('');

/** `run` with CRM_INBOX_DIR: files dropped into the directory, as a CRM's export job would. */
describe('the CRM inbox of the daemon', () => {
  let sandbox: TestSandbox;
  let schema: string | undefined;
  beforeAll(async () => {
    sandbox = await testSandbox({ seed: 9 });
  });
  afterAll(async () => {
    await sandbox?.close();
    if (schema) await dropSchema(schema);
  });

  const onPlatform = async () => (await sandbox.control.truth(sandbox.companyId)).contacts;

  it('pushes a dropped export once it is complete, then moves it and its report to processed/; an events file dropped three times sends each event once', async () => {
    const inbox = await mkdtemp(join(tmpdir(), 'rm-inbox-'));
    // A report left behind by a push killed before it moved its export: contacts-shaped, but a
    // report, never an export (the soak found the inbox pushing one).
    const leftover = 'killed.csv.rejects.csv';
    await writeFile(join(inbox, leftover), 'external_id,email,name\nreport-1,r1@example.com,From A Report\n');
    const setup = await daemonSetup(sandbox, {
      SYNC_REVIEWS_CRON: 'off',
      CRM_INBOX_DIR: inbox,
      CRM_INBOX_CRON: '* * * * * *',
      CRM_INBOX_SETTLE_SECONDS: '3',
      CONTACTS_RATE_PER_SECOND: '1000',
      EVENTS_RATE_PER_SECOND: '1000',
      EVENTS_POLL_SECONDS: '1',
    });
    schema = setup.schema;
    const daemon = new CliProcess(['run'], setup.env);
    try {
      await waitForHttp(`http://127.0.0.1:${setup.adminPort}/healthz`, 30_000);
      // The CRM is still writing: half the rows, then a pause shorter than the settle time.
      const file = join(inbox, 'crm-export.csv');
      await writeFile(file, `external_id,email,name\n${rows(0, 50)}`);
      await sleep(1_500);
      expect(await onPlatform()).toEqual([]);
      await appendFile(file, `${rows(50, 100)}not-an-id,not-an-email,Broken\n`);

      await waitFor(
        async () => (await readdir(join(inbox, 'processed'))).includes('crm-export.csv'),
        30_000,
        100,
      );
      const contacts = await onPlatform();
      expect(contacts.map((c) => c.external_id).sort()).toEqual(
        Array.from({ length: 100 }, (_, i) => `crm-${i}`).sort(),
      );
      expect(await readdir(inbox)).toEqual(expect.not.arrayContaining(['crm-export.csv']));
      expect(await readdir(inbox)).toContain(leftover);
      const report = await readFile(join(inbox, 'processed', 'crm-export.csv.rejects.csv'), 'utf8');
      expect(report).toContain('102,email,is not an email address,');

      // Dropped again, the same export sends nothing.
      const posts = async () =>
        Object.values(
          (await sandbox.control.requests()).by_route['POST /api/v1/partner/contacts'] ?? {},
        ).reduce((a, b) => a + b, 0);
      const before = await posts();
      await writeFile(join(inbox, 'again.csv'), `external_id,email,name\n${rows(0, 100)}`);
      await waitFor(async () => (await readdir(join(inbox, 'processed'))).includes('again.csv'), 30_000, 100);
      expect(await posts()).toBe(before);

      // What Prometheus sees of the two pushes.
      const sample = await scrapeMetrics(setup.adminPort);
      expect(sample('review_mirror_contacts_rows_total{outcome="sent_created"}')).toBe(100);
      expect(sample('review_mirror_contacts_rows_total{outcome="unchanged"}')).toBe(100);
      expect(sample('review_mirror_contacts_rows_total{outcome="rejected"}')).toBe(1);
      expect(sample('review_mirror_contacts_rows_total{outcome="failed"}')).toBe(0);
      expect(sample('review_mirror_contacts_push_duration_seconds_count')).toBe(2);
      expect(sample('review_mirror_contacts_push_rows_per_second')).toBeGreaterThan(0);
      expect(sample('review_mirror_contacts_last_success_timestamp_seconds')).toBeGreaterThan(
        Date.now() / 1000 - 120,
      );

      // An events file dropped three times (the CRM's job re-running): each event sent once.
      const eventsCsv = `event_id,email,event_type,metadata\n${Array.from(
        { length: 20 },
        (_, i) => `visit-${i},p${i}@example.com,appointment.completed,"{""k"":""visit-${i}""}"`,
      ).join('\n')}\n`;
      for (let drop = 1; drop <= 3; drop++) {
        await writeFile(join(inbox, 'events-visits.csv'), eventsCsv);
        await waitFor(async () => !(await readdir(inbox)).includes('events-visits.csv'), 30_000, 100);
      }
      expect(await readdir(join(inbox, 'processed'))).toContain('events-visits.csv');
      const visits = async () =>
        (await sandbox.control.truth(sandbox.companyId)).events.filter((e) =>
          String(e.metadata?.k).startsWith('visit-'),
        );
      await waitFor(async () => (await visits()).length >= 20, 30_000, 100);
      await sleep(2_000); // two more polls of the outbox: nothing more may be sent
      const sent = (await visits()).map((e) => String(e.metadata?.k)).sort();
      expect(sent).toEqual(Array.from({ length: 20 }, (_, i) => `visit-${i}`).sort());
    } finally {
      daemon.kill('SIGTERM');
      await daemon.exited;
    }
  });
});
