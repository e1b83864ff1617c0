import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { dropSchema, uniqueSchema } from '../helpers/db.js';
import type { TestSandbox } from '../helpers/sandbox.js';
import { pushCliSetup } from './helpers.js';

/**
 * Files as real exporters write them, pushed with the real CLI to the sandbox: each contact must
 * arrive on the platform exactly as the CRM holds it, and each broken row be in the report.
 */
describe('contacts push of real-world exports', () => {
  let sandbox: TestSandbox;
  let dir: string;
  const schema = uniqueSchema('exp');
  let env: NodeJS.ProcessEnv;

  beforeAll(async () => {
    ({ sandbox, dir, env } = await pushCliSetup({ seed: 11, schema }));
  });
  afterAll(async () => {
    await sandbox?.close();
    await dropSchema(schema);
  });

  const onPlatform = async (externalId: string) => {
    const c = (await sandbox.control.truth(sandbox.companyId)).contacts.find(
      (x) => x.external_id === externalId,
    );
    return c === undefined ? undefined : { email: c.email, name: c.name };
  };
  const push = async (name: string, bytes: Buffer | string, ...flags: string[]) => {
    const file = join(dir, name);
    await writeFile(file, bytes);
    const result = await runCli(['contacts', 'push', file, ...flags], env);
    const report = await readFile(`${file}.rejects.csv`, 'utf8');
    return { result, report: report.trim().split('\n').slice(1) };
  };

  it('Excel on Windows: UTF-8 with a BOM, CRLF, quoted commas and quotes', async () => {
    const { result, report } = await push(
      'excel.csv',
      Buffer.concat([
        Buffer.from([0xef, 0xbb, 0xbf]),
        Buffer.from(
          'external_id,email,name\r\nx-1,ana@example.com,"Lopez, Ana"\r\nx-2,bo@example.com,"Bo ""Bobby"" Ek"\r\nx-3,broken,Nope\r\n',
        ),
      ]),
    );
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('read=3 valid=2 rejected=1');
    expect(await onPlatform('x-1')).toEqual({ email: 'ana@example.com', name: 'Lopez, Ana' });
    expect(await onPlatform('x-2')).toEqual({ email: 'bo@example.com', name: 'Bo "Bobby" Ek' });
    expect(report).toEqual(['4,email,is not an email address,']);
  });

  it('a European Excel: ; delimited, windows-1252 with accented names', async () => {
    const { result } = await push(
      'european.csv',
      Buffer.from(
        'external_id;email;name\r\ns-1;elodie@example.com;Élodie Müller\r\ns-2;jose@example.com;José Núñez\r\n',
        'latin1',
      ),
      '--encoding',
      'windows-1252',
    );
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('valid=2 rejected=0');
    expect(await onPlatform('s-1')).toEqual({ email: 'elodie@example.com', name: 'Élodie Müller' });
    expect(await onPlatform('s-2')).toEqual({ email: 'jose@example.com', name: 'José Núñez' });
  });

  it('a CRM that quotes newlines inside a field, and a tab-delimited one', async () => {
    const quoted = await push(
      'multiline.csv',
      'external_id,email,name\nm-1,"mia@example.com","Mia\nSecond line"\nm-2,bad-email,"Also\nbroken"\nm-3,max@example.com,Max\n',
    );
    expect(quoted.result.code).toBe(0);
    expect(await onPlatform('m-1')).toEqual({ email: 'mia@example.com', name: 'Mia\nSecond line' });
    expect(await onPlatform('m-3')).toEqual({ email: 'max@example.com', name: 'Max' });
    expect(quoted.report).toEqual(['4,email,is not an email address,']);

    const tabs = await push('tabs.tsv', 'external_id\temail\tname\nt-1\ttia@example.com\tTia, Jr.\n');
    expect(tabs.result.code).toBe(0);
    expect(await onPlatform('t-1')).toEqual({ email: 'tia@example.com', name: 'Tia, Jr.' });
  });

  it('JSON Lines with one broken line', async () => {
    const { result, report } = await push(
      'export.jsonl',
      [
        '{"external_id":"j-1","email":"jo@example.com","name":"Jo Ström"}',
        '{"external_id":"j-2","email":"jay@example.com",',
        '',
        '{"external_id":"j-3","email":"jen@example.com","name":null}',
      ].join('\n'),
    );
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('read=3 valid=2 rejected=1');
    expect(await onPlatform('j-1')).toEqual({ email: 'jo@example.com', name: 'Jo Ström' });
    expect(await onPlatform('j-3')).toEqual({ email: 'jen@example.com', name: null });
    expect(report).toEqual(['2,(line),is not valid JSON,']);
  });
});
