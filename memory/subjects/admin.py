"""The console's subject pages: a list of every person's subjects, an entity page per subject (profile,
relations, facts, timeline) and a relationship view per person. Read only: the nightly step writes subjects."""

from __future__ import annotations

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from anima.core.admin import ReadOnlyAdmin
from anima.core.models import MemoryStatus
from conversations.models import Person
from memory.models import Subject, SubjectMention
from memory.subjects.entities import entity_detail, relationship_tree


@admin.register(Subject)
class SubjectAdmin(ReadOnlyAdmin):
    list_display = ("label_link", "person", "kind", "relation", "also", "relationships")
    list_filter = ("kind", "person")
    list_select_related = ("person",)
    search_fields = ("name", "aliases", "relation", "person__slug")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Subject]:
        # Only what an active profile or fact still speaks of: a subject forgetting left empty is shown nowhere.
        active = SubjectMention.objects.filter(subject=OuterRef("pk"), memory__status=MemoryStatus.ACTIVE)
        return super().get_queryset(request).filter(Q(profile__status=MemoryStatus.ACTIVE) | Exists(active))

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view(self.relationships_view)
        return [path("relationships/<slug:slug>/", view, name="memory_subject_relationships"), *super().get_urls()]

    @admin.display(description="subject", ordering="name")
    def label_link(self, obj: Subject) -> SafeString:
        return format_html("<a href='{}'>{}</a>", reverse("admin:memory_subject_change", args=[obj.pk]), obj.label())

    @admin.display(description="also called")
    def also(self, obj: Subject) -> str:
        return ", ".join(alias for alias in obj.aliases if alias != obj.label())

    @admin.display(description="relationships")
    def relationships(self, obj: Subject) -> SafeString:
        url = reverse("admin:memory_subject_relationships", args=[obj.person.slug])
        return format_html("<a href='{}'>{}'s</a>", url, obj.person.slug)

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "", extra_context=None) -> HttpResponse:
        """The entity page: its profile, relations, facts and timeline."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        subject = self.get_object(request, object_id)
        if subject is None:
            return self._get_obj_does_not_exist_redirect(request, self.model._meta, object_id)
        detail = entity_detail(person=subject.person, key=subject.key)
        context = {
            **self.admin_site.each_context(request),
            "title": f"{subject.label()} ({subject.person.slug})",
            "opts": self.model._meta,
            "subject": subject,
            "entity": detail,
        }
        return TemplateResponse(request, "admin/memory/subject/entity.html", context)

    def relationships_view(self, request: HttpRequest, slug: str) -> HttpResponse:
        """Who and what one person talks about, as a tree by relation."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        person = get_object_or_404(Person, slug=slug)
        context = {
            **self.admin_site.each_context(request),
            "title": f"Relationships of {person.display_name or person.slug}",
            "opts": self.model._meta,
            "person": person,
            "nodes": relationship_tree(person=person),
        }
        return TemplateResponse(request, "admin/memory/subject/relationships.html", context)
