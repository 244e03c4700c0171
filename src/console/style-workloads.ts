/**
 * Styles of the workload pages (sandboxes, sessions, webhooks, agents and the rest):
 * status badges, readable field lists, the conversation, the terminal. Contrast is at
 * least 4.5:1 on every text colour here (WCAG AA).
 */
export const WORKLOAD_CSS = `
.scroll { overflow-x: auto; position: relative; }
select { max-width: 100%; }
.badge { display: inline-block; padding: .05rem .45rem; border-radius: .8rem; font-size: .8rem; border: 1px solid; }
.badge.good { color: #065f46; background: #ecfdf5; border-color: #6ee7b7; }
.badge.bad { color: #991b1b; background: #fef2f2; border-color: #fca5a5; }
.badge.warn { color: #92400e; background: #fffbeb; border-color: #fcd34d; }
.badge.neutral { color: #374151; background: #f3f4f6; border-color: #d1d5db; }
tr.selected td { background: #eff6ff; }
td.actions, .nowrap { white-space: nowrap; }
td.actions button + button { margin-left: .3rem; }
button.link { background: none; border: none; padding: 0; color: #1d4ed8; text-decoration: underline; }
.detail, .panel, .resource { margin: 1rem 0; }
.detail { border-top: 2px solid #e5e7eb; padding-top: .5rem; }
details.panel > summary { cursor: pointer; font-weight: 600; padding: .3rem 0; }
dl.fields { display: grid; grid-template-columns: minmax(8rem, max-content) 1fr; gap: .2rem 1rem; margin: .5rem 0; background: #fff; padding: .5rem; border: 1px solid #e5e7eb; }
dl.fields > div { display: contents; }
dl.fields dt { font-weight: 600; color: #374151; }
dl.fields dd { margin: 0; overflow-wrap: anywhere; }
dl.fields dl.fields { border: none; padding: 0; }
ol.fields-list { margin: 0; padding-left: 1.2rem; }
.usage { display: flex; flex-direction: column; gap: .1rem; font-size: .85rem; white-space: nowrap; }
.usage meter { width: 4rem; vertical-align: middle; }
pre.terminal { background: #111827; color: #f9fafb; min-height: 12rem; max-height: 24rem; overflow: auto; padding: .6rem; font-size: .85rem; white-space: pre-wrap; word-break: break-all; }
pre.terminal.direct:focus-visible, pre.terminal.direct:focus { outline: 3px solid #16a34a; outline-offset: 2px; }
pre.code, pre.file { max-height: 20rem; overflow: auto; }
input.wide { min-width: min(28rem, 100%); }
.compose { display: flex; flex-direction: column; gap: .3rem; max-width: 48rem; margin-top: 1rem; }
.compose button { align-self: flex-start; }
.webhook-form p { display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; margin: .4rem 0; }
.webhook-form label { min-width: 5rem; }
ol.conversation { list-style: none; padding: 0; margin: .5rem 0; display: flex; flex-direction: column; gap: .5rem; max-width: 60rem; }
ol.conversation .who { margin: 0 0 .2rem; font-size: .85rem; color: #374151; }
ol.conversation .when { color: #4b5563; margin-left: .4rem; font-size: .8rem; }
.msg .bubble { padding: .5rem .8rem; border-radius: .6rem; white-space: pre-wrap; }
.msg.user { align-self: flex-end; max-width: 80%; }
.msg.user .bubble { background: #dbeafe; }
.msg.agent { align-self: flex-start; max-width: 80%; }
.msg.agent .bubble { background: #fff; border: 1px solid #e5e7eb; }
li.tool { border-left: 3px solid #7c3aed; padding: .2rem .6rem; background: #faf5ff; }
li.tool.result { border-color: #0891b2; background: #ecfeff; }
li.tool.result.failed { border-color: #b91c1c; background: #fef2f2; }
li.tool pre { margin: .2rem 0; }
li.status { text-align: center; font-size: .85rem; color: #374151; border-top: 1px dashed #d1d5db; padding-top: .2rem; }
li.status.bad { color: #991b1b; font-weight: 600; }
ol.attempts { margin: .2rem 0; padding-left: 1.2rem; font-size: .85rem; }
@media (max-width: 600px) {
  main { padding: .5rem; }
  dl.fields { grid-template-columns: 1fr; }
  .msg.user, .msg.agent { max-width: 100%; }
  input.wide { min-width: 0; width: 100%; }
}
`;
