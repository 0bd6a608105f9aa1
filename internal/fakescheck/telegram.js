// Telegram through grammY (grammy), which sends JSON bodies: the Bot API
// methods adapters/telegram calls, and getUpdates' offset.
import { Api } from 'grammy';
import { expect, equal } from './assert.js';

export function telegram(env) {
  const tg = env.telegram;
  const api = new Api(tg.token, { apiRoot: tg.api_root });
  const chat = 42;
  const person = 7;
  const push = async (what, params) => {
    const res = await fetch(`${env.control}/telegram/${what}?${new URLSearchParams(params)}`, { method: 'POST' });
    return (await res.json()).update_id;
  };
  let sent;
  let lastUpdate;
  let callback;

  return [
    ['getMe', async () => expect((await api.getMe()).is_bot, 'is_bot')],
    ['deleteWebhook', async () => expect(await api.deleteWebhook(), 'true')],
    ['setWebhook', async () => expect(await api.setWebhook('https://bot.example/telegram', { secret_token: 's3cret', allowed_updates: ['message', 'callback_query'] }), 'true')],
    ['getWebhookInfo', async () => equal((await api.getWebhookInfo()).url, 'https://bot.example/telegram', 'url')],
    ['setMyCommands', async () => expect(await api.setMyCommands([{ command: 'settings', description: 'Your settings' }]), 'true')],
    ['sendMessage', async () => {
      const m = await api.sendMessage(chat, 'Added <b>Buy milk</b>', {
        parse_mode: 'HTML',
        reply_markup: { inline_keyboard: [[{ text: 'Undo', callback_data: 'undo:1' }]] },
      });
      sent = m.message_id;
      equal(m.chat.id, chat, 'chat');
    }],
    ['editMessageText', async () => {
      const m = await api.editMessageText(chat, sent, 'Undone', { reply_markup: { inline_keyboard: [] } });
      equal(m.text, 'Undone', 'text');
    }],
    ['sendChatAction', async () => expect(await api.sendChatAction(chat, 'typing'), 'true')],
    ['sendMessageDraft', async () => expect(await api.raw.sendMessageDraft({ chat_id: chat, draft_id: 1, text: 'Thinking…' }), 'true')],
    ['getUpdates', async () => {
      await push('text', { chat, user: person, text: 'hello' });
      lastUpdate = await push('text', { chat, user: person, text: 'buy milk' });
      const ups = await api.getUpdates({ timeout: 0 });
      equal(ups.length, 2, 'updates');
      equal(ups[1].message.text, 'buy milk', 'text');
    }],
    ['getUpdates offset confirms earlier updates', async () => {
      const ups = await api.getUpdates({ offset: lastUpdate, timeout: 0 });
      equal(ups.map((u) => u.update_id).join(), String(lastUpdate), 'update ids from the offset on');
      const none = await api.getUpdates({ offset: lastUpdate + 1, timeout: 0 });
      equal(none.length, 0, 'updates after confirming all');
    }],
    ['setMessageReaction', async () => {
      const m = (await api.getUpdates({ offset: lastUpdate, timeout: 0 }))[0]?.message;
      const id = m?.message_id ?? sent;
      expect(await api.setMessageReaction(chat, id, [{ type: 'emoji', emoji: '👀' }]), 'true');
    }],
    ['answerCallbackQuery', async () => {
      const id = await push('callback', { chat, user: person, message: sent, data: 'undo:1' });
      const ups = await api.getUpdates({ offset: id, timeout: 0 });
      callback = ups.find((u) => u.callback_query)?.callback_query;
      expect(callback, 'a callback query');
      expect(await api.answerCallbackQuery(callback.id, { text: 'Undone' }), 'true');
    }],
    ['getFile and download', async () => {
      const f = await api.getFile(tg.file_id);
      const res = await fetch(`${tg.api_root}/file/bot${tg.token}/${f.file_path}`);
      equal(res.status, 200, 'download status');
    }],
  ];
}
