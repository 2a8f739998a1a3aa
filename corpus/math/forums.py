"""Forum threads from common forum software as posts: first post = question, replies = answers.

Only the posts' bodies are taken, so navigation, breadcrumbs, user cards, "similar threads" and
footers never reach the text. Quotes of earlier posts (which repeat them) and signatures are removed
from each body. Formulas are already LaTeX (html_math.latexify ran on the tree) and a formula's
escaped line breaks are tidied (html_math.tidy_formulas).

Post bodies per software, as their default templates write them (XPath 1.0 over class tokens):
- XenForo 2: `article.message .bbWrapper` (not the signature's); XenForo 1: `blockquote.messageText`
- vBulletin 3/4: `[id^=post_message_]`, `blockquote.postcontent`; vBulletin 5: `.js-post__content-text`
- MyBB: `div.post_body`
- phpBB 3 (prosilver): `.postbody .content`; phpBB 2 (subsilver): `span.postbody`
- Discourse: `.cooked` (the app) or the crawler view's `.crawler-post [itemprop=text]`
- any other page with schema.org `DiscussionForumPosting` microdata: its `itemprop=text` (not `Comment`:
  blog comments carry it, and a blog is not a thread)
The first software whose bodies are found decides; a page needs one post at least.
"""

from __future__ import annotations

from .html_math import node_text, tidy_formulas
from .thread import QA, Answer


def _cls(name: str) -> str:
    return f"contains(concat(' ', normalize-space(@class), ' '), ' {name} ')"


BODY_XPATHS = (
    ("xenforo2", f"//article[{_cls('message')}]//*[{_cls('bbWrapper')}][not(ancestor::*[{_cls('message-signature')}])]"),
    ("xenforo1", f"//blockquote[{_cls('messageText')}]"),
    ("vbulletin5", f"//*[{_cls('js-post__content-text')}]"),
    ("vbulletin", f"//*[starts-with(@id, 'post_message_')] | //blockquote[{_cls('postcontent')}]"),
    ("mybb", f"//div[{_cls('post_body')}]"),
    ("phpbb3", f"//*[{_cls('postbody')}]//div[{_cls('content')}]"),
    ("phpbb2", f"//span[{_cls('postbody')}]"),
    ("discourse", f"//*[{_cls('cooked')}] | //*[{_cls('crawler-post')}]//*[@itemprop='text']"),
    ("microdata", "//*[contains(@itemtype, 'DiscussionForumPosting')]"
                  "//*[@itemprop='text' or @itemprop='articleBody']"),
)
# inside a post: quotes of other posts, signatures, edit notes, attachment lists
NOISE_XPATH = (f".//*[{_cls('bbCodeBlock--quote')} or {_cls('bbCodeQuote')} or {_cls('quote')} or "
               f"{_cls('quotecontainer')} or {_cls('bbcode_quote')} or {_cls('mycode_quote')} or "
               f"{_cls('signature')} or {_cls('message-signature')} or {_cls('editedBy')} or {_cls('attachments')} "
               f"or {_cls('message-lastEdit')} or {_cls('notice')}] | .//blockquote[{_cls('uncited')}] | "
               ".//aside[contains(@class, 'quote')] | .//cite")


def find_posts(root) -> tuple[str, list]:
    """(software, post bodies in document order, outermost only), or ("", [])."""
    for software, xpath in BODY_XPATHS:
        found = root.xpath(xpath)
        if found:
            chosen = set(found)
            return software, [el for el in found if not any(a in chosen for a in el.iterancestors())]
    return "", []


def post_text(el) -> str:
    for noise in el.xpath(NOISE_XPATH):
        if noise.getparent() is not None:
            noise.drop_tree()
    return tidy_formulas(node_text(el))


def extract_thread(root, title: str) -> QA | None:
    """QA(kind="forum") from a latexified tree, or None when no forum software's posts are found."""
    software, bodies = find_posts(root)
    texts = [t for t in (post_text(b) for b in bodies) if t]
    if not texts:
        return None
    return QA(title, texts[0], [Answer(t, None, False) for t in texts[1:]], kind="forum")
