"""The English slot grammar's predicates: after a subject ("I", "my sister Ana", "Biscuit"), the pattern that says
which attribute a clause states and its value, in the order they are tried."""

from __future__ import annotations

import re

from sleep.slots._values import EN_ACQUIRED, EN_COUNT, EN_HAVE, EN_NUMBER_WORDS

# A state said with "am" or "is" ("I'm vegetarian", "she's retired"): the attribute it sets and its value.
EN_STATES = {
    "retired": ("status", "retired"),
    "unemployed": ("job", "unemployed"),
    "married": ("marital", "married"),
    "single": ("marital", "single"),
    "divorced": ("marital", "divorced"),
    "engaged": ("marital", "engaged"),
    "widowed": ("marital", "widowed"),
    "pregnant": ("status", "pregnant"),
    "vegetarian": ("diet", "vegetarian"),
    "vegan": ("diet", "vegan"),
    "pescatarian": ("diet", "pescatarian"),
    "lactose intolerant": ("allergy:lactose", "+"),
    "gluten intolerant": ("allergy:gluten", "+"),
    "gluten-free": ("restriction:gluten", "+"),
    "left-handed": ("handedness", "left"),
    "right-handed": ("handedness", "right"),
}
# What a habit does ("I swim every morning", "plays chess on Sundays").
_EN_HABIT_VERBS = (
    r"play|practi[cs]e|knit|sew|paint|draw|swim|run|jog|cycle|bike|ride|hike|climb|surf|ski|skate|dance|sing|"
    r"cook|bake|garden|read|write|meditate|pray|volunteer|teach|study|go|walk|train|lift|box|fish|row|sail|"
    r"collect|brew|journal|blog|stream|skateboard|golf|do"
)
# Words saying a statement holds now ("these days my favourite band is …"): they leave its slot as it is.
EN_NOW = (
    r"(?:these days|nowadays|lately|recently|currently|now|right now|just now|at the moment|at present|for now|"
    r"as of (?:now|today)|these past (?:few )?(?:days|weeks|months))"
)

EN_PREDICATES: tuple[tuple[str, re.Pattern], ...] = tuple(
    (attribute, re.compile(pattern, re.I))
    for attribute, pattern in (
        (
            "name",
            # "Call me lazy, but…" names nobody: after "call me" only a capitalised word is a name.
            r"^(?:name is|name's|'s name is|'s name's|am called|'m called|is called|'s called|is named|'s named|"
            r"go by|goes by|call me(?=\s+(?-i:[A-Z])))\s+(?P<value>[A-Z][\w-]+)",
        ),
        ("email", r"^(?:e-?mail(?: address)?|email)(?:'s| is|:)\s*(?:now\s+)?(?P<value>\S+@\S+?)[.,]?(?:\s|$)"),
        ("phone", r"^(?:phone(?: number)?|number|mobile|cell)(?:'s| is|:)\s*(?P<value>[+\d][\d\s()-]{5,})"),
        ("birthday", r"^birthday(?:'s| is)\s+(?:on\s+)?(?P<value>[^,.;!?]+)"),
        (
            "age",
            r"^(?:am|is|'m|'s|turned|just turned|will be|'ll be|is turning|'s turning|turns)\s+"
            # A number of anything else is no age: "I'm 10 minutes away", "20 mins every night".
            r"(?P<value>\d{1,3})(?!\d|\s*(?:%|percent|km|kms|miles?|kg|kgs|lbs|pounds?|minutes?|mins?|hours?|hrs?|"
            r"seconds?|secs?|days?|weeks?|months?|times|o'clock|pm|am|floors?|blocks?|steps?|points?|feet|ft|cm|"
            r"metres?|meters?|euros?|dollars?|bucks|away|:|\.\d|,\d|-year))",
        ),
        # "she's 7-year-old", "he's a two-year-old beagle"
        ("age", rf"^(?:am|is|'m|'s)\s+(?:an?\s+)?(?P<value>\d{{1,3}}|{EN_NUMBER_WORDS})-year-old\b"),
        (
            "age",
            # Spelled out, the number must end the clause ("she's seven", "he turned eight years old"): "is one
            # of my friends" is no age.
            rf"^(?:am|is|'m|'s|turned|just turned|will be|'ll be|is turning|'s turning|turns)\s+"
            rf"(?P<value>{EN_NUMBER_WORDS})(?:\s+years?\s+old)?(?:\s+(?:now|already|today|this year))?\s*[.!?]*\s*$",
        ),
        ("zodiac", r"^(?:was|were)\s+born\s+in\s+the\s+year\s+of\s+the\s+(?P<value>[a-z]+)"),
        (
            "residence",
            r"^(?:now\s+|currently\s+|still\s+)?(?:live|lives|living|am living|'m living|'ve been living|"
            r"'ve lived|have lived|has lived|'s lived|"
            r"reside|resides|am based|'m based|is based|'s based|am staying|'m staying|stay|stays)\s+"
            r"(?:in|at|near|outside|on|by)\s+(?P<value>[^,.;!?]+)",
        ),
        (
            "residence",
            r"^(?:just\s+|finally\s+|recently\s+)?(?:moved|relocated|(?:'ve|have|has|'s)\s+(?:moved|relocated)|"
            r"(?:am|'m|are|'re|is|'s)\s+(?:moving|relocating|going to move)|"
            r"(?:will|'ll)\s+(?:be moving|move))\s+(?:back\s+)?(?:to|into|over to)\s+(?P<value>[^,.;!?]+)",
        ),
        (
            "origin",
            # A place, not "the school of thought", "work" or "a big family" ("the UK" is one).
            r"^(?:am|'m|is|'s|come|comes|was born|grew up|was raised|were raised)\s+(?:originally\s+)?(?:from|in)\s+"
            r"(?P<value>(?:the\s+(?-i:[A-Z])|(?!(?:an?|the|my|our|his|her|their|this|that|work|school|home|here|there)\b)"
            r"[A-Z])[^,.;!?]*)",
        ),
        (
            "workplace",
            r"^(?:now\s+|currently\s+|still\s+)?(?:work|works|working|am working|'m working)\s+"
            r"(?:(?:from home|remotely|part[- ]time|full[- ]time|freelance|nights|weekends|"
            r"(?:night |day |early |late )?shifts)\s+)?(?:at|for|in)\s+(?P<value>[^,.;!?]+)",
        ),
        (
            "job",
            r"^(?:now\s+|currently\s+|still\s+|just\s+|recently\s+)?(?:work|works|am working|'m working|"
            r"(?:have\s+|'ve\s+)?(?:started|began|begun) working)\s+as\s+(?:an?\s+)?(?P<value>[^,.;!?]+)",
        ),
        (
            "job",
            # A new job told as news: "just started a new job as a pharmacist", "got a position as a nurse".
            r"^(?:just\s+|recently\s+)?(?:have\s+|'ve\s+)?(?:started|began|begun|got|took|landed|accepted)\s+"
            r"(?:(?:a|my)\s+(?:new\s+|first\s+)?|(?:new|first)\s+)(?:job|position|role)\s+as\s+(?:an?\s+)?"
            r"(?P<value>[^,.;!?]+)",
        ),
        (
            "job",
            # "got promoted to head chef": the job is now that one.
            r"^(?:just\s+|finally\s+|recently\s+)?(?:got|was|'ve been|have been|has been|'s been|am|'m|is)\s+"
            r"promoted\s+to\s+(?:an?\s+|the\s+)?(?P<value>[^,.;!?]+)",
        ),
        (
            "workplace",
            # A new job told by where: "just started a new job at a bank", "got a job with the council".
            r"^(?:just\s+|recently\s+|finally\s+)?(?:have\s+|'ve\s+)?(?:started|began|begun|got|landed|took)\s+"
            r"(?:a|my)\s+(?:new\s+|first\s+)?job\s+(?:at|with|in)\s+(?P<value>[^,.;!?]+)",
        ),
        (
            "uses",
            r"^(?:now\s+)?(?:mainly|mostly|mostly just|primarily|usually|mainly just)\s+"
            r"(?:use|uses|work with|works with|"
            r"code in|codes in|write|writes|program in)\s+(?P<value>[^,.;!?]+)",
        ),
        ("job", r"^(?:job is|job's|occupation is)\s+(?:an?\s+)?(?P<value>[^,.;!?]+)"),
        ("job", r"^(?:teach|teaches)\s+(?P<value>[^,.;!?]+)"),
        ("job", r"^(?:am|'m|is|'s)\s+(?:now\s+|still\s+|currently\s+)?(?:an?|the)\s+(?P<value>[^,.;!?]+)"),
        (
            "state",
            r"^(?:am|'m|is|'s)\s+(?:now\s+|still\s+|currently\s+|happily\s+|recently\s+|)(?P<value>"
            + "|".join(re.escape(k) for k in EN_STATES)
            + r")\b",
        ),
        (
            "allergy",
            r"^(?:am|'m|is|'s)\s+(?:very\s+|severely\s+|badly\s+|really\s+|deathly\s+)?allergic\s+to\s+(?P<value>[^,.;!?]+)",
        ),
        (
            "allergy",
            r"^(?:have|has|'ve got|have got)\s+(?:an?\s+)?(?:severe\s+|bad\s+|mild\s+)?(?P<value>[\w -]+?)\s+allergy",
        ),
        (
            "restriction",
            r"^(?:can't|cannot|can not|don't|do not|doesn't|does not|never|try not to|must not|mustn't|"
            r"shouldn't|am not allowed to|'m not allowed to|is not allowed to)\s+(?:eat|eats|drink|drinks|have|touch|"
            r"stomach|digest|tolerate)\s+(?P<value>[^,.;!?]+)",
        ),
        ("restriction", r"^(?:avoid|avoids|stay away from|stays away from)\s+(?P<value>[^,.;!?]+)"),
        (
            "favourite",
            r"^(?:new\s+|all-time\s+|current\s+|absolute\s+)?(?:favou?rite|fave|favorite|fav)\s+"
            r"(?P<category>[a-z]+(?: show| language)?)"
            rf"(?:\s+{EN_NOW})?\s+(?:is|are|'s|has to be|would be|has been|has become)\s+(?:now\s+)?"
            r"(?P<value>[^,.;!?]+)",
        ),
        (
            "likes",
            r"^(?:really\s+|absolutely\s+|totally\s+|just\s+|also\s+|actually\s+|still\s+|kind of\s+|"
            r"quite\s+|now\s+|truly\s+)*(?P<verb>like|likes|love|loves|enjoy|enjoys|adore|adores|prefer|prefers|"
            r"am into|'m into|is into|'m obsessed with|am obsessed with|'m a (?:huge |big )?fan of|"
            r"am a (?:huge |big )?fan of|dig)\s+(?P<value>[^,.;!?]+)",
        ),
        (
            "unlikes",
            r"^(?:no longer|don't|do not|doesn't|does not)\s+(?:really\s+)?"
            r"(?:hate|hates|dislike|dislikes|mind|minds)\s+"
            r"(?P<value>[^,.;!?]+)",
        ),
        (
            "dislikes",
            r"^(?:really\s+|absolutely\s+|just\s+|also\s+|still\s+|honestly\s+|actually\s+)*"
            r"(?P<verb>hate|hates|dislike|dislikes|can't stand|cannot stand|can't bear|detest|loathe|"
            r"don't like|do not like|doesn't like|don't really like|don't enjoy|don't care for|"
            r"am not a fan of|'m not a fan of|'m not into|am not into|'m not a|am not a|"
            # The same said of someone ("Ben is not into sushi anymore"), as a fact reads it back.
            r"is not a fan of|isn't a fan of|'s not a fan of|is not into|isn't into|'s not into|"
            r"no longer like|no longer love|no longer enjoy)\s+(?P<value>[^,.;!?]+)",
        ),
        (
            "stopped",
            r"^(?:am no longer|'m no longer|is no longer|'s no longer|no longer|quit|quits|stopped|gave up|"
            r"have quit|'ve quit|has quit|'ve stopped|has stopped|"
            r"have stopped)\s+(?P<value>[^,.;!?]+?)(?:\s+any\s*more|\s+anymore)?$",
        ),
        (
            "plan",
            r"^(?:am|'m|are|'re|is|'s)\s+(?:planning|going|heading|flying|travelling|traveling|off|"
            # "getting married in June" is about the marriage: "getting" is the verb, the rest the thing
            r"saving up|saving|training|preparing|studying|applying|getting(?=\s+married)|moving)\s*"
            r"(?P<value>(?:to|for|on|a|an|up)?\s*[^,.;!?]+)",
        ),
        ("plan", r"^(?:plan|plans|intend|hope|want|am hoping|'m hoping)\s+to\s+(?P<value>[^,.;!?]+)"),
        (
            "event",
            r"^(?:(?:'ve |have |has |just )?(?:signed up|registered|entered)\s+(?:for|in)|have|has|'ve got|got)\s+"
            r"(?:an?\s+|my\s+|the\s+)?(?P<value>[\w -]*?(?:appointment|exam|interview|marathon|race|"
            r"meeting|test|surgery|operation|flight|trip|wedding|party|deadline|concert|match|recital|audition|"
            r"check-?up|presentation|conference)\b[^,.;!?]*)",
        ),
        (
            "learning",
            r"^(?:'ve been|have been|has been|'s been|am|'m|is|'s|(?:'ve |have |has |'s )?(?:started|begun|began))\s+"
            r"(?:learning|studying|taking lessons in|practi[cs]ing)\s+"
            # "learning that commuting is the worst" is a lesson of life, not a subject.
            r"(?!(?:that|how|what|why|when|not)\b)(?P<value>[^,.;!?]+)",
        ),
        (
            "habit",
            rf"^(?:usually\s+|always\s+|often\s+|normally\s+|regularly\s+|sometimes\s+|also\s+|still\s+)*"
            rf"(?P<value>(?:{_EN_HABIT_VERBS})(?:s|es)?\b[^,.;!?]*)",
        ),
        (
            "has",
            rf"^(?:{EN_HAVE}|{EN_ACQUIRED})\s+(?P<value>{EN_COUNT}\s+[^,.;!?]+)",
        ),
        ("passed", r"^(?:passed away|died)\b(?P<value>[^,.;!?]*)"),
        (
            "achieved",
            r"^(?:just\s+|finally\s+)?(?:passed|aced|finished|completed|graduated from|graduated|won|got promoted|"
            r"got engaged|got married|got the job|got into|got accepted to|got accepted into)\b(?P<value>[^,.;!?]*)",
        ),
    )
)
