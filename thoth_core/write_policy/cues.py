"""Instruction cues in other languages: the write policy's second net.

The first net is `language`: a text the policy cannot read as plain English is held whatever it
says. This table only names what such a text is about, so a reviewer sees "instruction" rather
than "unjudged", and lets the firewall flag a request to set the rules aside in any language
("ignore ... règles"). For each language it has words for `assistant`, `ignore`, `rules`, `always`,
`answer`, `must`, `instructions` and `system`, in the script people write it in and, for languages
of other scripts, romanised. No cue is an English word (a test checks every word of the English
list), so plain English is judged by the English tables alone.

Cues are matched on text folded the same way (`fold`: compatibility forms, accents and other marks,
invisible characters removed, case folded): Latin and Cyrillic cues as whole words (a cue's `\\w*`
allows endings), cues of other scripts anywhere, since those scripts do not separate words.
"""

from __future__ import annotations

import functools
import re
import unicodedata

CONCEPTS = ("assistant", "ignore", "rules", "always", "answer", "must", "instructions", "system")

# language -> concept -> cue alternatives (regexes, written folded: no accents, lower case)
# fmt: off
CUES: dict[str, dict[str, str]] = {
    "fr": {
        "assistant": r"l'assistant|assistante|l'ia|l'agent",
        "ignore": r"ignorer|ignorez|ignorons|ignorent|oublie|oublier|oubliez", "rules": r"regles?|reglement",
        "always": r"toujours", "answer": r"repond\w*|reponse\w*", "must": r"doit|doivent|devez|dois|faut",
        "instructions": r"consignes?|l'instruction|l'instructions", "system": r"systeme",
    },
    "de": {
        "assistant": r"assistent\w*|ki-assistent\w*", "ignore": r"ignorier\w*|missacht\w*|vergiss|vergessen|vergesst",
        "rules": r"regeln?|vorschriften?|richtlinien?", "always": r"immer|stets",
        "answer": r"antwort\w*|beantwort\w*", "must": r"mussen|musst|sollst|sollen",
        "instructions": r"anweisung\w*|anleitung\w*",
        "system": r"systemprompt\w*|systemanweisung\w*|systemnachricht\w*|systems?einstellung\w*",
    },
    "es": {
        "assistant": r"asistente|asistentes", "ignore": r"ignora|ignoran|ignorar|ignoren|ignorando|olvida\w*",
        "rules": r"reglas|normas", "always": r"siempre",
        "answer": r"responde|responda|respondas|contesta|contestar|conteste|respuestas?",
        "must": r"debe|debes|deben|tienes\s+que", "instructions": r"instrucciones", "system": r"sistema",
    },
    "it": {
        "assistant": r"assistente|l'assistente", "ignore": r"ignora|ignorare|ignori|ignorino|dimentica\w*",
        "rules": r"regole|norme", "always": r"sempre", "answer": r"rispond\w*|risposta|risposte",
        "must": r"deve|dovete|devono|bisogna", "instructions": r"istruzioni", "system": r"sistema",
    },
    "pt": {
        "assistant": r"assistente|o\s+assistente", "ignore": r"ignora|ignorar|ignorem|esquec\w*", "rules": r"regras",
        "always": r"sempre", "answer": r"responda|responde|responder|resposta|respostas",
        "must": r"deve|devem|precisa", "instructions": r"instrucoes", "system": r"sistema",
    },
    "nl": {
        "assistant": r"assistent|assistenten", "ignore": r"negeer\w*|negeren|vergeet|vergeten", "rules": r"regels",
        "always": r"altijd", "answer": r"antwoord\w*|beantwoord\w*", "must": r"moeten|verplicht",
        "instructions": r"instructies", "system": r"systeem",
    },
    "pl": {
        "assistant": r"asystent\w*", "ignore": r"ignoruj\w*|zignoruj\w*|zapomnij\w*",
        "rules": r"zasady|zasad|reguly|regulamin", "always": r"zawsze", "answer": r"odpowiad\w*|odpowiedz\w*",
        "must": r"musi|musisz|musza|musicie", "instructions": r"instrukcj\w*",
        "system": r"systemu|systemowe|systemowy|systemowa",
    },
    "ru": {
        "assistant": r"ассистент\w*|помощник\w*", "ignore": r"игнорир\w*|проигнорир\w*|забудь\w*|забыть",
        "rules": r"правил\w*", "always": r"всегда", "answer": r"отвеча\w*|ответ\w*", "must": r"долж\w*|обязан\w*",
        "instructions": r"инструкци\w*", "system": r"систем\w*",
    },
    "tr": {
        "assistant": r"asistan\w*",
        "ignore": r"yoksay\w*|gormezden|gormezden\s+gel\w*|unut|unutun|unutmak|unuttur\w*", "rules": r"kural\w*",
        "always": r"her\s+zaman|daima", "answer": r"yanit\w*|cevap\w*",
        "must": r"zorunda\w*|gerekir|gerekiyor|malisin|malidir|melisin|melidir", "instructions": r"talimat\w*",
        "system": r"sistem\w*",
    },
    "zh": {
        "assistant": r"助手|助理", "ignore": r"忽略|无视|無視|忽視|忘记|忘記", "rules": r"规则|規則|规定|規定",
        "always": r"总是|總是|始终|始終|永远|永遠", "answer": r"回答|回复|回覆|答复|答覆",
        "must": r"必须|必須", "instructions": r"指令|指示", "system": r"系统|系統",
    },
    "ja": {
        "assistant": r"アシスタント", "ignore": r"無視|忘れ", "rules": r"ルール|規則", "always": r"常に|いつも",
        "answer": r"答え|回答|返答|応答", "must": r"必ず|なければ|なさい",
        "instructions": r"指示", "system": r"システム",
    },
    "ko": {
        "assistant": r"어시스턴트|비서|도우미", "ignore": r"무시|잊어", "rules": r"규칙", "always": r"항상|언제나",
        "answer": r"대답|답변|응답", "must": r"해야|반드시", "instructions": r"지시|지침", "system": r"시스템",
    },
    "ar": {
        "assistant": r"المساعد|مساعد", "ignore": r"تجاهل|تتجاهل|انسى", "rules": r"القواعد|قواعد", "always": r"دائما",
        "answer": r"أجب|اجب|الرد|أجيب", "must": r"يجب", "instructions": r"التعليمات|تعليمات", "system": r"النظام",
    },
    "hi": {
        "assistant": r"सहायक|असिस्टेंट", "ignore": r"अनदेखा|नजरअंदाज|नज़रअंदाज़|भूल", "rules": r"नियम",
        "always": r"हमेशा", "answer": r"जवाब|उत्तर", "must": r"चाहिए|अवश्य", "instructions": r"निर्देश",
        "system": r"सिस्टम",
    },
    # romanised (transliterated) forms of the languages above written in other scripts
    "ru-latn": {
        "assistant": r"assistent\w*|pomoshnik\w*|pomoshchnik\w*", "ignore": r"ignorir\w*|proignorir\w*",
        "rules": r"pravil\w*", "always": r"vsegda", "answer": r"otvecha\w*|otvet\w*",
        "must": r"dolzhen|dolzhna|dolzhny|obyazan\w*", "instructions": r"instrukts\w*|instrukci\w*",
        "system": r"sistem[ayeu]|sistemy",
    },
    "zh-latn": {
        "assistant": r"zhushou|zhuli", "ignore": r"hulue|hulve|wushi", "rules": r"guize",
        "always": r"zongshi|shizhong|yongyuan", "answer": r"huida|huifu|dafu", "must": r"bixu",
        "instructions": r"zhiling|zhishi", "system": r"xitong",
    },
    "ja-latn": {
        "assistant": r"ashisutanto", "ignore": r"mushi", "rules": r"ruru|ruuru|kisoku", "always": r"tsuneni|itsumo",
        "answer": r"kotae\w*|kaitou|hentou|outou", "must": r"kanarazu|nakereba", "instructions": r"shiji",
        "system": r"shisutemu",
    },
    "ko-latn": {
        "assistant": r"eoshiseuteonteu|biseo|doumi", "ignore": r"musi\s*hae\w*|musihae\w*", "rules": r"gyuchik",
        "always": r"hangsang|eonjena", "answer": r"daedap|dapbyeon|eungdap", "must": r"haeya|bandeusi",
        "instructions": r"jisi|jichim", "system": r"siseutem",
    },
    "ar-latn": {
        "assistant": r"al-?musa'?id|musa'?id", "ignore": r"tajahal", "rules": r"qawa'?id|al-?qawa'?id",
        "always": r"da'?iman|dayman", "answer": r"ajib|al-?radd", "must": r"yajib",
        "instructions": r"ta'?limat|al-?ta'?limat", "system": r"al-?nizam|nizam",
    },
    "hi-latn": {
        "assistant": r"sahayak|sahaayak", "ignore": r"andekha|anadekha|nazarandaz", "rules": r"niyam\w*",
        "always": r"hamesha|hamesa", "answer": r"jawab|jawaab|uttar", "must": r"chahiye|avashya",
        "instructions": r"nirdesh\w*", "system": r"sistam",
    },
}
# fmt: on
SET_ASIDE = ("ignore",)  # with one of RULES, a request to set the rules aside
RULES = ("rules", "instructions", "system")
ENGLISH_SET_ASIDE = r"ignor\w*|disregard\w*|forget\w*|bypass\w*|overrid\w*|skip\w*|drop\w*"
ENGLISH_RULES = r"rules?|instructions?|guidelines?|polic(?:y|ies)|prompts?|restrictions?|filters?|system"


def fold(text: str) -> str:
    """Text as cues are matched: compatibility forms, no marks or invisible characters, case folded."""
    decomposed = unicodedata.normalize("NFKD", text.replace("’", "'"))
    kept = "".join(ch for ch in decomposed if unicodedata.category(ch)[0] != "M" and unicodedata.category(ch) != "Cf")
    return unicodedata.normalize("NFC", kept).casefold()


def _bounded(cue: str) -> bool:
    """Whether a cue is written in a script that separates words (Latin, Cyrillic)."""
    letters = [ch for ch in cue if ch.isalpha()]
    return all(ch.isascii() or "CYRILLIC" in unicodedata.name(ch, "") for ch in letters)


def _pattern(alternatives: list[str]) -> re.Pattern[str]:
    """One pattern for cues: whole words for Latin and Cyrillic ones, anywhere for the others."""
    folded = [fold(cue) for alternative in alternatives for cue in alternative.split("|")]
    bounded = "|".join(cue for cue in folded if _bounded(cue))
    anywhere = "|".join(cue for cue in folded if not _bounded(cue))
    parts = [rf"(?<![^\W_])(?:{bounded})(?![^\W_])"] if bounded else []
    return re.compile("|".join(parts + ([anywhere] if anywhere else [])))


@functools.cache
def concept_pattern(concept: str) -> re.Pattern[str]:
    """The cues of one concept, every language."""
    return _pattern([table[concept] for table in CUES.values() if concept in table])


@functools.cache
def _english(concept: str) -> re.Pattern[str]:
    return _pattern([ENGLISH_SET_ASIDE if concept == "ignore" else ENGLISH_RULES])


def foreign_cues(text: str) -> list[str]:
    """The words of `text` that are instruction cues in another language (as folded)."""
    folded = fold(text)
    return [m.group(0) for concept in CONCEPTS for m in concept_pattern(concept).finditer(folded)]


def sets_rules_aside(text: str) -> bool:
    """Whether `text` asks to ignore rules or instructions in some language (one of the two words not English)."""
    folded = fold(text)
    foreign_ignore = any(concept_pattern(c).search(folded) for c in SET_ASIDE)
    foreign_rules = any(concept_pattern(c).search(folded) for c in RULES)
    english_ignore = bool(_english("ignore").search(folded))
    english_rules = bool(_english("rules").search(folded))
    return (foreign_ignore and (foreign_rules or english_rules)) or (english_ignore and foreign_rules)
