// Todoist through Doist's SDK (@doist/todoist-api-typescript, which is
// @doist/todoist-sdk): every endpoint and /sync command agent/todoist
// uses, and the OAuth flow of team mode (accounts). The SDK validates each
// answer against its zod schemas, so a missing or misspelt field fails
// the call.
import {
  TodoistApi, TodoistRequestError, createCommand, getAuthorizationUrl, getAuthToken, revokeToken,
} from '@doist/todoist-api-typescript';
import { expect, equal } from './assert.js';

export function todoist(env) {
  const t = env.todoist;
  const api = new TodoistApi(t.token, { baseUrl: t.origin });
  let token = '*';
  const sync = (req) => api.sync({ syncToken: token, ...req });
  const resources = ['projects', 'sections', 'labels', 'items', 'user'];
  let added;
  let project;
  let section;
  let note;

  const o = t.oauth;
  let granted;

  return [
    ['OAuth: authorize, access_token', async () => {
      const url = getAuthorizationUrl({ clientId: o.client_id, permissions: ['data:read_write', 'data:delete'], state: 's1', baseUrl: o.origin });
      // The person's browser, signed in to Todoist, approves the app.
      const res = await fetch(url, { headers: { Cookie: o.cookie }, redirect: 'manual' });
      const back = new URL(res.headers.get('location') ?? '', 'http://invalid');
      equal(`${back.origin}${back.pathname}`, o.redirect_url, 'redirected to the app');
      equal(back.searchParams.get('state'), 's1', 'state');
      const tok = await getAuthToken({ clientId: o.client_id, clientSecret: o.client_secret, code: back.searchParams.get('code') }, { baseUrl: o.origin });
      granted = tok.accessToken;
      expect(granted, 'an access token');
    }],
    ['OAuth: the token reads its account', async () => {
      const u = await new TodoistApi(granted, { baseUrl: o.origin }).getUser();
      equal(u.email, 'pat@example.com', 'email');
    }],
    ['OAuth: revoke', async () => {
      expect(await revokeToken({ clientId: o.client_id, clientSecret: o.client_secret, token: granted }, { baseUrl: o.origin }), 'revoked');
      let err;
      try {
        await new TodoistApi(granted, { baseUrl: o.origin }).getUser();
      } catch (e) {
        err = e;
      }
      expect(err?.httpStatusCode === 401, `a revoked token is refused with 401, got ${err}`);
    }],
    ['GET /user', async () => {
      const u = await api.getUser();
      equal(u.inboxProjectId, t.inbox_id, 'inbox project');
      expect(u.tzInfo.timezone === 'Europe/Berlin', `tz_info.timezone ${u.tzInfo.timezone}`);
    }],
    ['GET /projects', async () => {
      const { results } = await api.getProjects();
      expect(results.some((p) => p.id === t.project_id), 'the seeded project is listed');
    }],
    ['GET /projects/{id}', async () => equal((await api.getProject(t.project_id)).name, 'Groceries', 'name')],
    ['GET /sections', async () => {
      const { results } = await api.getSections({ projectId: t.project_id });
      equal(results[0]?.id, t.section_id, 'section');
    }],
    ['GET /labels', async () => {
      const { results } = await api.getLabels();
      expect(results.some((l) => l.name === t.label), 'the seeded label is listed');
    }],
    ['GET /tasks', async () => {
      const { results } = await api.getTasks({ projectId: t.project_id });
      equal(results[0]?.id, t.task_id, 'task');
    }],
    ['GET /tasks?limit&cursor', async () => {
      const first = await api.getTasks({ limit: 5 });
      expect(first.nextCursor, 'a next cursor after 5 of 10 tasks');
      const next = await api.getTasks({ limit: 5, cursor: first.nextCursor });
      expect(next.results.length > 0, 'the second page has tasks');
    }],
    ['GET /tasks/{id}', async () => equal((await api.getTask(t.task_id)).content, 'Buy milk', 'content')],
    ['GET /tasks/filter', async () => {
      const { results } = await api.getTasksByFilter({ query: '#Groceries' });
      equal(results[0]?.id, t.task_id, 'filtered task');
    }],
    ['GET /comments', async () => {
      const { results } = await api.getComments({ taskId: t.task_id });
      expect(Array.isArray(results), 'a list of comments');
    }],
    ['POST /sync full read', async () => {
      const r = await sync({ resourceTypes: resources });
      expect(r.fullSync, 'full_sync');
      expect(r.labels.some((l) => l.name === t.label && typeof l.order === 'number'), 'labels with order');
      expect(r.projects.some((p) => p.inboxProject), 'the Inbox');
      expect(r.user.inboxProjectId === t.inbox_id, 'user');
      token = r.syncToken;
    }],
    ['POST /sync project_add, section_add, label_add', async () => {
      const r = await sync({
        commands: [
          createCommand('project_add', { name: 'Errands' }, 'p1'),
          createCommand('section_add', { name: 'Town', projectId: 'p1' }, 's1'),
          createCommand('label_add', { name: 'quick' }, 'l1'),
        ],
      });
      project = r.tempIdMapping.p1;
      section = r.tempIdMapping.s1;
      expect(project && section && r.tempIdMapping.l1, 'temp ids mapped');
    }],
    ['POST /sync item_add', async () => {
      const r = await sync({
        commands: [createCommand('item_add', {
          content: 'Post the letter', projectId: project, priority: 4, labels: ['quick'], due: { string: 'tomorrow' },
        }, 't1')],
      });
      added = r.tempIdMapping.t1;
      expect(added, 'temp id mapped');
    }],
    ['POST /sync incremental read', async () => {
      const r = await sync({ resourceTypes: resources });
      expect(!r.fullSync, 'an incremental sync');
      expect(r.items.some((i) => i.id === added), 'the new task');
      token = r.syncToken;
    }],
    ['POST /sync item_update', async () => {
      await sync({ commands: [createCommand('item_update', { id: added, content: 'Post both letters', description: 'stamps' })] });
    }],
    ['POST /sync item_move', async () => {
      await sync({ commands: [createCommand('item_move', { id: added, sectionId: section })] });
    }],
    ['POST /sync note_add', async () => {
      const r = await sync({ commands: [createCommand('note_add', { itemId: added, content: 'by noon' }, 'n1')] });
      note = r.tempIdMapping.n1;
      expect(note, 'temp id mapped');
    }],
    ['POST /sync note_delete', async () => {
      await sync({ commands: [createCommand('note_delete', { id: note })] });
    }],
    ['POST /sync item_close, item_uncomplete', async () => {
      await sync({ commands: [createCommand('item_close', { id: added }), createCommand('item_uncomplete', { id: added })] });
    }],
    ['POST /sync item_update_date_complete', async () => {
      await sync({
        commands: [createCommand('item_update_date_complete', { id: added, due: { date: '2026-12-24', string: 'every day' }, isForward: false })],
      });
    }],
    ['POST /sync incremental read after writes', async () => {
      const r = await sync({ resourceTypes: resources });
      expect(r.items.some((i) => i.id === added && i.sectionId === section), 'the moved task');
      token = r.syncToken;
    }],
    ['POST /sync item_delete, section_delete, project_delete', async () => {
      await sync({
        commands: [createCommand('item_delete', { id: added }), createCommand('section_delete', { id: section }),
          createCommand('project_delete', { id: project })],
      });
    }],
    ['POST /sync incremental read of deletions', async () => {
      const r = await sync({ resourceTypes: resources });
      expect(r.items.some((i) => i.id === added && i.isDeleted), 'the deleted task');
      expect(r.projects.some((p) => p.id === project && p.isDeleted), 'the deleted project');
      token = r.syncToken;
    }],
    ['POST /sync a command\'s error in sync_status', async () => {
      let err;
      try {
        await sync({ commands: [createCommand('item_close', { id: 'no-such-task' })] });
      } catch (e) {
        err = e;
      }
      expect(err instanceof TodoistRequestError, `the SDK's TodoistRequestError, got ${err}`);
    }],
  ];
}
